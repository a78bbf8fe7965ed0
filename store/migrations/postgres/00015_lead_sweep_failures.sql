-- +goose Up
-- The sites whose leads the lead sweep could not read
-- (store.RecordLeadSweepFailure): the sweep records the site and goes on
-- with the others, and `siteops overview` lists them. reason is the
-- failure's class (an HTTP status, "network", a position that does not
-- decode), never a message, a body or a key; since is the first failure
-- of the run of failures, last_at the latest, failures their count. A read
-- that succeeds again removes the row. A new table: the previous release,
-- running beside this one during a rollout, never reads it.
CREATE TABLE lead_sweep_failures (
    site_id  TEXT        PRIMARY KEY,
    reason   TEXT        NOT NULL,
    since    TIMESTAMPTZ NOT NULL,
    last_at  TIMESTAMPTZ NOT NULL,
    failures BIGINT      NOT NULL DEFAULT 1
);

-- +goose Down
DROP TABLE lead_sweep_failures;
