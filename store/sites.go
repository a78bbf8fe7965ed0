package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SetSiteWorkflow records which onboarding workflow owns a site, so that
// webhooks about the site can be routed to it.
func (s *Store) SetSiteWorkflow(ctx context.Context, siteID, workflowID string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO site_workflows (site_id, workflow_id, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (site_id) DO UPDATE SET workflow_id = excluded.workflow_id, updated_at = excluded.updated_at`,
		siteID, workflowID, s.now().UTC())
	if err != nil {
		return fmt.Errorf("store: recording the workflow of site %s: %w", siteID, err)
	}
	return nil
}

// SiteWorkflow returns the onboarding workflow id of a site.
func (s *Store) SiteWorkflow(ctx context.Context, siteID string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT workflow_id FROM site_workflows WHERE site_id = $1`, siteID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: no workflow recorded for site %s", ErrNotFound, siteID)
	}
	return id, err
}
