-- What a lead.created row costs PostgreSQL itself, index by index (issue 22,
-- item 4; bench/README.md). The inbox table as migrations 00002–00010 leave
-- it, in a scratch schema; 100,000 rows per INSERT, first with the primary
-- key only, then with each index a lead.created row enters added in turn
-- (inbox_dead and inbox_site_events are partial indexes it does not enter).
-- Per row: divide each INSERT's time by 100,000. Run with
--   psql -h 127.0.0.1 -U postgres -d test -f bench/inbox_indexes.sql
-- The schema is dropped at the end.
DROP SCHEMA IF EXISTS idxexp CASCADE; CREATE SCHEMA idxexp; SET search_path=idxexp;
CREATE TABLE inbox (
    event_id TEXT PRIMARY KEY, event_type TEXT NOT NULL, receiver TEXT NOT NULL, endpoint_id TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL, body BYTEA NOT NULL, trace_context TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at TIMESTAMPTZ NOT NULL, last_error TEXT NOT NULL DEFAULT '',
    dispatched_at TIMESTAMPTZ, outcome TEXT NOT NULL DEFAULT '', lane SMALLINT NOT NULL DEFAULT 1, kind TEXT NOT NULL DEFAULT 'webhook',
    subject_event_id TEXT NOT NULL DEFAULT '', failures INTEGER NOT NULL DEFAULT 0, replays INTEGER NOT NULL DEFAULT 0,
    replayed_at TIMESTAMPTZ, replayed_by TEXT NOT NULL DEFAULT '');
\timing on
INSERT INTO inbox (event_id,event_type,receiver,endpoint_id,received_at,body,next_attempt_at) SELECT 'evt_a'||md5(i::text), 'lead.created','rcv','ep', now()+i*interval '1 microsecond', convert_to(repeat('x',900),'UTF8'), now() FROM generate_series(1,100000) i;
CREATE INDEX inbox_pending ON inbox (lane, next_attempt_at) WHERE dispatched_at IS NULL;
INSERT INTO inbox (event_id,event_type,receiver,endpoint_id,received_at,body,next_attempt_at) SELECT 'evt_b'||md5(i::text), 'lead.created','rcv','ep', now()+i*interval '1 microsecond', convert_to(repeat('x',900),'UTF8'), now() FROM generate_series(1,100000) i;
CREATE INDEX inbox_received ON inbox (received_at);
INSERT INTO inbox (event_id,event_type,receiver,endpoint_id,received_at,body,next_attempt_at) SELECT 'evt_c'||md5(i::text), 'lead.created','rcv','ep', now()+i*interval '1 microsecond', convert_to(repeat('x',900),'UTF8'), now() FROM generate_series(1,100000) i;
CREATE INDEX inbox_pending_age ON inbox (received_at) WHERE dispatched_at IS NULL;
INSERT INTO inbox (event_id,event_type,receiver,endpoint_id,received_at,body,next_attempt_at) SELECT 'evt_d'||md5(i::text), 'lead.created','rcv','ep', now()+i*interval '1 microsecond', convert_to(repeat('x',900),'UTF8'), now() FROM generate_series(1,100000) i;
CREATE INDEX inbox_dead ON inbox (received_at) WHERE outcome = 'dead';
CREATE INDEX inbox_site_events ON inbox (event_type, received_at) WHERE event_type IN ('knowledge.ready', 'site.published', 'site.unpublished');
INSERT INTO inbox (event_id,event_type,receiver,endpoint_id,received_at,body,next_attempt_at) SELECT 'evt_e'||md5(i::text), 'lead.created','rcv','ep', now()+i*interval '1 microsecond', convert_to(repeat('x',900),'UTF8'), now() FROM generate_series(1,100000) i;
INSERT INTO inbox (event_id,event_type,receiver,endpoint_id,received_at,body,next_attempt_at) SELECT 'evt_f'||md5(i::text), 'lead.created','rcv','ep', now()+i*interval '1 microsecond', convert_to(repeat('x',900),'UTF8'), now() FROM generate_series(1,100000) i;
DROP SCHEMA idxexp CASCADE;
