-- +goose Up
-- Each worker and ingress records the size of its pool of database
-- connections (SITEOPS_DATABASE_MAX_CONNS) in the process registry, so that
-- `siteops doctor` can add up what the processes using the store may open
-- against what the server allows. Processes of releases before it record
-- nothing: 0, counted at the default.
ALTER TABLE siteops_processes ADD COLUMN max_conns INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE siteops_processes DROP COLUMN max_conns;
