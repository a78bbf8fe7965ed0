-- +goose Up
-- Where each site's lead sync stands: written in the transaction that
-- stores a page of leads (store.UpsertLeadsAt), so that a retried attempt
-- or a sync cut short goes on from the first page not stored, never from a
-- heartbeat that lags the store. One row per site: the sync named by
-- sync_key; position is JSON (cursors, counts, the stall clock).
CREATE TABLE lead_sync_positions (
    site_id    TEXT      PRIMARY KEY,
    sync_key   TEXT      NOT NULL,
    position   TEXT      NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE lead_sync_positions;
