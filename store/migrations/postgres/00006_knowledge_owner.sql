-- +goose Up
-- owner is who stored a text through the Nexus service (its quota counts
-- bytes per owner); NULL for texts the CLI or an earlier release stored.
-- used_at is when an onboarding last referenced or read the text: texts
-- nobody used for the retention period are purged. Both are nullable, so
-- the previous release keeps inserting rows as it did (expand only).
ALTER TABLE knowledge_texts ADD COLUMN owner TEXT;
ALTER TABLE knowledge_texts ADD COLUMN bytes BIGINT;
ALTER TABLE knowledge_texts ADD COLUMN used_at TIMESTAMPTZ;
CREATE INDEX knowledge_texts_owner ON knowledge_texts (owner);

-- +goose Down
DROP INDEX knowledge_texts_owner;
ALTER TABLE knowledge_texts DROP COLUMN used_at;
ALTER TABLE knowledge_texts DROP COLUMN bytes;
ALTER TABLE knowledge_texts DROP COLUMN owner;
