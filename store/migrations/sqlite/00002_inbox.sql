-- +goose Up
CREATE TABLE inbox (
    event_id        TEXT      PRIMARY KEY,
    event_type      TEXT      NOT NULL,
    receiver        TEXT      NOT NULL,
    endpoint_id     TEXT      NOT NULL,
    received_at     TIMESTAMP NOT NULL,
    body            BLOB      NOT NULL,
    trace_context   TEXT      NOT NULL DEFAULT '',
    attempts        INTEGER   NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMP NOT NULL,
    last_error      TEXT      NOT NULL DEFAULT '',
    dispatched_at   TIMESTAMP,
    outcome         TEXT      NOT NULL DEFAULT ''
);
CREATE INDEX inbox_pending ON inbox (next_attempt_at) WHERE dispatched_at IS NULL;
CREATE INDEX inbox_received ON inbox (received_at);

CREATE TABLE rotations (
    endpoint_id TEXT      PRIMARY KEY,
    workflow_id TEXT      NOT NULL,
    created_at  TIMESTAMP NOT NULL
);

CREATE TABLE pending_receivers (
    receiver TEXT      PRIMARY KEY,
    until    TIMESTAMP NOT NULL
);

ALTER TABLE webhook_secrets ADD COLUMN first_verified_at TIMESTAMP;
ALTER TABLE webhook_secrets ADD COLUMN first_verified_event TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE webhook_secrets DROP COLUMN first_verified_event;
ALTER TABLE webhook_secrets DROP COLUMN first_verified_at;
DROP TABLE pending_receivers;
DROP TABLE rotations;
DROP TABLE inbox;
