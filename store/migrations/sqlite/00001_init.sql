-- +goose Up
CREATE TABLE leads (
    site_id    TEXT      NOT NULL,
    lead_id    TEXT      NOT NULL,
    raw        TEXT      NOT NULL,
    first_seen TIMESTAMP NOT NULL,
    last_seen  TIMESTAMP NOT NULL,
    PRIMARY KEY (site_id, lead_id)
);

CREATE TABLE knowledge_texts (
    hash       TEXT      PRIMARY KEY,
    text       TEXT      NOT NULL,
    created_at TIMESTAMP NOT NULL
);

CREATE TABLE site_workflows (
    site_id     TEXT      PRIMARY KEY,
    workflow_id TEXT      NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);

CREATE TABLE webhook_secrets (
    endpoint_id  TEXT      PRIMARY KEY,
    receiver     TEXT      NOT NULL,
    ciphertext   BLOB      NOT NULL,
    fingerprint  TEXT      NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    retire_after TIMESTAMP,
    retired_at   TIMESTAMP
);
CREATE INDEX webhook_secrets_receiver ON webhook_secrets (receiver);

-- +goose Down
DROP TABLE webhook_secrets;
DROP TABLE site_workflows;
DROP TABLE knowledge_texts;
DROP TABLE leads;
