-- +goose Up
CREATE TABLE inbox (
    event_id        TEXT      PRIMARY KEY,
    event_type      TEXT      NOT NULL,
    receiver        TEXT      NOT NULL,
    endpoint_id     TEXT      NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL,
    body            BYTEA     NOT NULL,
    trace_context   TEXT      NOT NULL DEFAULT '',
    attempts        INTEGER   NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    last_error      TEXT      NOT NULL DEFAULT '',
    dispatched_at   TIMESTAMPTZ,
    outcome         TEXT      NOT NULL DEFAULT ''
);
CREATE INDEX inbox_pending ON inbox (next_attempt_at) WHERE dispatched_at IS NULL;
CREATE INDEX inbox_received ON inbox (received_at);

CREATE TABLE rotations (
    endpoint_id TEXT      PRIMARY KEY,
    workflow_id TEXT      NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE pending_receivers (
    receiver TEXT      PRIMARY KEY,
    until    TIMESTAMPTZ NOT NULL
);

ALTER TABLE webhook_secrets ADD COLUMN first_verified_at TIMESTAMPTZ;
ALTER TABLE webhook_secrets ADD COLUMN first_verified_event TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_secrets DROP COLUMN first_verified_event;
ALTER TABLE webhook_secrets DROP COLUMN first_verified_at;
DROP TABLE pending_receivers;
DROP TABLE rotations;
DROP TABLE inbox;
