-- +goose Up
-- The record of deliveries the ingresses refused before recording them
-- (a bad or stale signature, a receiver that does not exist, a secret
-- that does not decrypt, a body too large, no slot, ...): one row per
-- receiver, reason and minute, its count added to by every ingress that
-- refused one (webhookingress, refusals.go; `siteops events list
-- --refused`). An ingress writes it at most once a second, whatever it
-- refuses, and prunes it to SITEOPS_REFUSED_RETENTION and
-- SITEOPS_REFUSED_MAX_ROWS. minute_unix is the Unix time of the minute's
-- start; first_unix_ms and last_unix_ms are the first and last refusal
-- counted, in Unix milliseconds (integers compare and aggregate alike in
-- both dialects).
-- receiver is the path's name as the ingress took it ('' for POST
-- /webhooks; a name out of form quoted; '(other)' for names past the
-- ingress's budget of names a minute); event_id and event_type are a
-- refused delivery's whose signature verified (else ''). Never a body, a
-- header, an address or a secret. A new table: the previous release,
-- running beside this one during a rollout, never reads it.
CREATE TABLE refused_deliveries (
    minute_unix   INTEGER NOT NULL,
    receiver      TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    status        INTEGER NOT NULL,
    count         INTEGER NOT NULL,
    first_unix_ms INTEGER NOT NULL,
    last_unix_ms  INTEGER NOT NULL,
    event_id      TEXT    NOT NULL DEFAULT '',
    event_type    TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (minute_unix, receiver, reason)
);

-- +goose Down
DROP TABLE refused_deliveries;
