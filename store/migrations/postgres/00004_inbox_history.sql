-- +goose Up
-- failures counts the failed dispatch attempts since the event was recorded
-- or last replayed: the relay's backoff and its dead-letter bound read it,
-- while attempts keeps counting every attempt. A dead letter has outcome
-- 'dead' and a dispatched_at, so that the relay no longer claims it and the
-- lag leaves it out; the purge keeps it whatever its age.
ALTER TABLE inbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN replayed_at TIMESTAMPTZ;
ALTER TABLE inbox ADD COLUMN replayed_by TEXT NOT NULL DEFAULT '';
UPDATE inbox SET failures = attempts WHERE dispatched_at IS NULL;
-- The dead letters, for their gauge and `events list --outcome dead`: an
-- event is recorded with no outcome, so the accept path writes no entry.
CREATE INDEX inbox_dead ON inbox (received_at) WHERE outcome = 'dead';

-- One row per dispatch attempt (kind 'attempt': its number, outcome, the
-- workflow and run it reached or tried, the error) and per replay (kind
-- 'replay': its number and who asked). The relay writes a claimed batch's
-- rows with one statement, in the transaction that marks the batch; the
-- purge deletes them with their event.
CREATE TABLE inbox_history (
    id          BIGINT    GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    TEXT      NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    kind        TEXT      NOT NULL,
    attempt     INTEGER   NOT NULL,
    replay      INTEGER   NOT NULL,
    outcome     TEXT      NOT NULL DEFAULT '',
    workflow_id TEXT      NOT NULL DEFAULT '',
    run_id      TEXT      NOT NULL DEFAULT '',
    error       TEXT      NOT NULL DEFAULT '',
    operator    TEXT      NOT NULL DEFAULT ''
);
CREATE INDEX inbox_history_event ON inbox_history (event_id, id);

-- inbox_site_id reads data.site_id of a recorded body for `events list
-- --site`, and NULL for a body that is not such JSON (a record siteops
-- made, or bytes that are not UTF-8) instead of failing the query.
-- +goose StatementBegin
CREATE FUNCTION inbox_site_id(body BYTEA) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN convert_from(body, 'UTF8')::jsonb -> 'data' ->> 'site_id';
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX inbox_dead;
DROP FUNCTION inbox_site_id(BYTEA);
DROP TABLE inbox_history;
ALTER TABLE inbox DROP COLUMN replayed_by;
ALTER TABLE inbox DROP COLUMN replayed_at;
ALTER TABLE inbox DROP COLUMN replays;
ALTER TABLE inbox DROP COLUMN failures;
