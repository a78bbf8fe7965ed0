-- +goose Up
-- The relay's lag gauge reads the oldest pending event every second. With
-- only inbox_received to go by, both SQLite and PostgreSQL walked that index
-- from the oldest event kept, through every dispatched one the retention
-- keeps, before they met a pending one: a read that grew with the inbox's
-- history and, on SQLite, held the store's one connection while it did.
-- This index holds the pending events only (a row leaves it when it is
-- dispatched), so the oldest is its first entry.
CREATE INDEX inbox_pending_age ON inbox (received_at) WHERE dispatched_at IS NULL;

-- +goose Down
DROP INDEX inbox_pending_age;
