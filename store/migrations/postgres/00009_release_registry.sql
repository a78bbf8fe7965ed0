-- +goose Up
-- The process registry: every worker and ingress of release 3 and later
-- records itself here at start and again every 30 s (seen_at), and removes
-- itself when it stops, so that `siteops release finalize` can tell
-- whether a process of an older release still uses the store. Processes
-- of releases before 3 never register.
CREATE TABLE siteops_processes (
    id             TEXT      PRIMARY KEY,
    role           TEXT      NOT NULL,
    release_number INTEGER   NOT NULL,
    build_id       TEXT      NOT NULL DEFAULT '',
    host           TEXT      NOT NULL DEFAULT '',
    started_at     TIMESTAMPTZ NOT NULL,
    seen_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX siteops_processes_seen ON siteops_processes (seen_at);

-- The releases finalized on this store (`siteops release finalize`): the
-- contract steps of each ran, and a binary of an older release refuses
-- the store.
CREATE TABLE siteops_releases (
    release_number INTEGER   PRIMARY KEY,
    finalized_at   TIMESTAMPTZ NOT NULL,
    finalized_by   TEXT      NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE siteops_releases;
DROP TABLE siteops_processes;
