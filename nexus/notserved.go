package nexus

import (
	"context"
	"fmt"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"

	"github.com/siteops/siteops/nexus/api"
)

// notServed refuses one of the on-call playbooks' operation names, which
// earlier releases served: whoever reaches the service may be a partner
// (or anyone who reaches the frontend's HTTP API), and the playbooks can
// switch a site's embed off, or on with the caller's origins, and move
// every webhook to a URL of the caller's choosing. The refusal is logged
// with the caller as the request names it, and says where the playbook
// runs instead.
func (s *Service) notServed(name string) func(context.Context, any, nexusrpc.StartOperationOptions) (any, error) {
	cli := map[string]string{
		api.EmbedOffName:     "siteops embed off --site ID --reason TEXT",
		api.EmbedOnName:      "siteops embed on --site ID",
		api.RotateSecretName: "siteops secret rotate --endpoint ID --url URL",
	}[name]
	return func(ctx context.Context, _ any, opts nexusrpc.StartOperationOptions) (any, error) {
		caller := callerOf(ctx, opts.Header, opts.Links, opts.RequestID)
		s.o.Logger.Warn("nexus request refused: an on-call playbook is not served to callers of the Nexus service",
			"operation", name, "caller", caller)
		msg := fmt.Sprintf("%s is an on-call playbook and is not served through the Nexus service (whoever reaches the service could run it); on-call runs it with the siteops CLI and its own Temporal credentials: %s", name, cli)
		return nil, refused(nexusrpc.HandlerErrorTypeUnauthorized, api.ErrTypeNotServed, msg)
	}
}
