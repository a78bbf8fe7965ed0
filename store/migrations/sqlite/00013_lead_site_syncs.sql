-- +goose Up
-- What the lead event shards (workflow LeadEvents) did for each site: the
-- lead.created events they counted and the syncs they ran, for
-- `siteops leads status` and the Nexus lead-sync-status operation, which
-- add them to the site's own lead sync, if it has one. One row per site;
-- last_key names the last sync counted and last_order when it was scheduled
-- (ms), so that an activity retried after it recorded its sync counts it
-- once, and one that records late, after a later sync, changes nothing
-- (store.RecordLeadSiteSync).
CREATE TABLE lead_site_syncs (
    site_id          TEXT      PRIMARY KEY,
    events           BIGINT    NOT NULL DEFAULT 0,
    duplicate_events BIGINT    NOT NULL DEFAULT 0,
    syncs            BIGINT    NOT NULL DEFAULT 0,
    leads            BIGINT    NOT NULL DEFAULT 0,
    caught_up        BOOLEAN   NOT NULL DEFAULT FALSE,
    last_error       TEXT      NOT NULL DEFAULT '',
    last_key         TEXT      NOT NULL,
    last_order       BIGINT    NOT NULL DEFAULT 0,
    last_sync_at     TIMESTAMP NOT NULL
);

-- +goose Down
DROP TABLE lead_site_syncs;
