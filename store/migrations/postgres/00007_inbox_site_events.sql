-- +goose NO TRANSACTION
-- +goose Up
-- An onboarding reads its site's knowledge.ready, site.published and
-- site.unpublished events from the inbox while it waits (store.SiteEvents),
-- so that no signal it missed is ever needed. This index holds only those
-- three types, a few per site, so the read never scans the lead.created
-- that fill most of the inbox; it adds nothing to recording a lead.created.
-- It is built CONCURRENTLY (outside a transaction), so that the ingresses
-- of the previous release, still recording during a rollout, are never
-- blocked while it builds on a large inbox.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_site_events ON inbox (event_type, received_at)
    WHERE event_type IN ('knowledge.ready', 'site.published', 'site.unpublished');

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS inbox_site_events;
