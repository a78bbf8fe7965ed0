-- +goose NO TRANSACTION
-- +goose Up
-- The relay's lag gauge reads the oldest pending event every second. With
-- only inbox_received to go by, PostgreSQL walked that index from the
-- oldest event kept, through every dispatched one the retention keeps,
-- before it met a pending one: a read that grew with the inbox's history.
-- This index holds the pending events only (a row leaves it when it is
-- dispatched), so the oldest is its first entry. It is built CONCURRENTLY
-- (outside a transaction), so that the ingresses of the previous release,
-- still recording during a rollout, are never blocked while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_pending_age ON inbox (received_at) WHERE dispatched_at IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS inbox_pending_age;
