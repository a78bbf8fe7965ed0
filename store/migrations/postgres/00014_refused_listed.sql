-- +goose Up
-- Whether the ingress's list of receivers held a refused delivery's
-- receiver: the record's size bound (SITEOPS_REFUSED_MAX_ROWS) prunes the
-- rows of made-up names first (store.PruneRefusals), so that a flood of
-- them cannot push the real receivers' refusals out. The rows written
-- before, and by the previous release during a rollout, count as made-up:
-- they are pruned first, as every row was, and age out within the
-- retention.
ALTER TABLE refused_deliveries ADD COLUMN listed BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE refused_deliveries DROP COLUMN listed;
