package nexus

import (
	"context"
	"errors"
	"fmt"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/api/serviceerror"

	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// leadSyncStatus answers the site's lead sync progress query.
func (s *Service) leadSyncStatus(ctx context.Context, in api.LeadSyncStatusInput, _ nexusrpc.StartOperationOptions) (api.LeadSyncProgress, error) {
	if err := required("site_id", in.SiteID); err != nil {
		return api.LeadSyncProgress{}, err
	}
	p, err := s.starter(ctx).LeadProgress(ctx, in.SiteID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return api.LeadSyncProgress{}, handlerError(fmt.Errorf("no lead sync of site %s (%s), and no lead event shard synced it; a sync starts with the site's first lead.created webhook or `siteops leads sync --site %s`: %w",
			in.SiteID, workflows.LeadSyncID(in.SiteID), in.SiteID, starter.ErrNotFound))
	}
	if err != nil {
		return api.LeadSyncProgress{}, handlerError(err)
	}
	var out api.LeadSyncProgress
	return out, convert(p, &out)
}
