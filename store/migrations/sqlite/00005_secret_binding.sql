-- +goose Up
-- key_id names the key a secret is sealed with: '' is the first format (the
-- raw SITEOPS_SECRET_KEY, additional data the endpoint id only); otherwise
-- an id derived from SITEOPS_SECRET_KEY, whose per-purpose key (HKDF) seals
-- the secret bound to its endpoint, receiver and retirement.
-- origin is the idempotency key of the API call that created the endpoint,
-- so that a re-run of the same operation finds the endpoint it created.
ALTER TABLE webhook_secrets ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_secrets ADD COLUMN origin TEXT NOT NULL DEFAULT '';
CREATE INDEX webhook_secrets_origin ON webhook_secrets (origin);

-- +goose Down
DROP INDEX webhook_secrets_origin;
ALTER TABLE webhook_secrets DROP COLUMN origin;
ALTER TABLE webhook_secrets DROP COLUMN key_id;
