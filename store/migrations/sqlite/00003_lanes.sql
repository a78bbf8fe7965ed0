-- +goose Up
-- Lanes keep the events workflows wait on out of the queue of bulk ones;
-- kind tells webhook events from the records siteops makes itself (the
-- first verified delivery on an endpoint), whose typed columns the relay
-- reads instead of a body.
ALTER TABLE inbox ADD COLUMN lane INTEGER NOT NULL DEFAULT 1;
ALTER TABLE inbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'webhook';
ALTER TABLE inbox ADD COLUMN subject_event_id TEXT NOT NULL DEFAULT '';
UPDATE inbox SET lane = 0 WHERE event_type <> 'lead.created';
UPDATE inbox SET kind = 'endpoint-verified',
    subject_event_id = COALESCE(json_extract(CAST(body AS TEXT), '$.data.event_id'), '')
  WHERE event_type = 'siteops.endpoint.verified';
DROP INDEX inbox_pending;
CREATE INDEX inbox_pending ON inbox (lane, next_attempt_at) WHERE dispatched_at IS NULL;

-- A mark per endpoint creation, so that one op's end does not end
-- another's; ended_at tells the ingress when a secret was stored.
DROP TABLE pending_receivers;
CREATE TABLE expected_secrets (
    receiver TEXT NOT NULL,
    op       TEXT NOT NULL,
    until    TIMESTAMP NOT NULL,
    ended_at TIMESTAMP,
    PRIMARY KEY (receiver, op)
);

-- +goose Down
DROP TABLE expected_secrets;
CREATE TABLE pending_receivers (
    receiver TEXT     PRIMARY KEY,
    until    TIMESTAMP NOT NULL
);
DROP INDEX inbox_pending;
CREATE INDEX inbox_pending ON inbox (next_attempt_at) WHERE dispatched_at IS NULL;
ALTER TABLE inbox DROP COLUMN subject_event_id;
ALTER TABLE inbox DROP COLUMN kind;
ALTER TABLE inbox DROP COLUMN lane;
