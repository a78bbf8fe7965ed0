package nexus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	nexusrpc "github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/workflows"
)

// embedOff opens the site's embed incident, or joins the open one, and
// answers once the API acknowledged the PATCH: starter.EmbedOff. A retried
// request joins the incident it opened (no second PATCH) and says Joined.
func (s *Service) embedOff(ctx context.Context, in api.EmbedOffInput, _ nexusrpc.StartOperationOptions) (api.EmbedOffOutput, error) {
	if err := required("site_id", in.SiteID, "operator", in.Operator, "reason", in.Reason); err != nil {
		return api.EmbedOffOutput{}, err
	}
	res, err := s.starter(ctx).EmbedOff(ctx, in.SiteID, in.Operator, in.Reason)
	if err != nil {
		return api.EmbedOffOutput{}, handlerError(err)
	}
	var out api.EmbedOffOutput
	return out, convert(res, &out)
}

// embedOn decides the site's open incident: restore the embed, with
// corrected origins when given, and answer once it is on. It sends the
// decide update as starter.EmbedOn does, with one difference: the update
// ID derives from the Nexus request ID, so that a retried request (after
// a slow PATCH outlived the request's deadline) waits for the same
// decision instead of being refused as a second one.
func (s *Service) embedOn(ctx context.Context, in api.EmbedOnInput, opts nexusrpc.StartOperationOptions) (api.EmbedIncident, error) {
	if err := required("site_id", in.SiteID, "operator", in.Operator); err != nil {
		return api.EmbedIncident{}, err
	}
	c := s.starter(ctx).Client
	id := workflows.EmbedIncidentID(in.SiteID)
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || (err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING) {
		return api.EmbedIncident{}, handlerError(fmt.Errorf("site %s: %w", in.SiteID, starter.ErrNoOpenIncident))
	}
	if err != nil {
		return api.EmbedIncident{}, handlerError(err)
	}
	runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, RunID: runID, UpdateID: workflows.Key("embed-on", opts.RequestID),
		UpdateName:   workflows.UpdateDecide,
		Args:         []any{workflows.EmbedDecision{Action: workflows.DecisionRestore, AllowedOrigins: in.AllowedOrigins, Operator: in.Operator}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var st workflows.EmbedIncidentStatus
	if err == nil {
		err = h.Get(ctx, &st)
	}
	if err != nil {
		return api.EmbedIncident{}, decideErr(id, runID, err)
	}
	var out api.EmbedIncident
	return out, convert(st, &out)
}

// decideErr tells a decision the workflow refused before acting on it (its
// validator said no) from one it failed to carry out (an activity failed),
// as the starter does.
func decideErr(id, runID string, err error) error {
	var actErr *temporal.ActivityError
	var app *temporal.ApplicationError
	if !errors.As(err, &actErr) && errors.As(err, &app) {
		return handlerError(&starter.RejectedError{WorkflowID: id, Reason: app.Message()})
	}
	if errors.As(err, &actErr) {
		return handlerError(&starter.WorkflowFailedError{WorkflowID: id, RunID: runID, Status: "Failed", Cause: starter.RootCause(err)})
	}
	return handlerError(err)
}

// leadSyncStatus answers the site's lead sync progress query.
func (s *Service) leadSyncStatus(ctx context.Context, in api.LeadSyncStatusInput, _ nexusrpc.StartOperationOptions) (api.LeadSyncProgress, error) {
	if err := required("site_id", in.SiteID); err != nil {
		return api.LeadSyncProgress{}, err
	}
	p, err := s.starter(ctx).LeadProgress(ctx, in.SiteID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return api.LeadSyncProgress{}, handlerError(fmt.Errorf("no lead sync of site %s (%s); it starts with the site's first lead.created webhook or `siteops leads sync --site %s`: %w",
			in.SiteID, workflows.LeadSyncID(in.SiteID), in.SiteID, starter.ErrNotFound))
	}
	if err != nil {
		return api.LeadSyncProgress{}, handlerError(err)
	}
	var out api.LeadSyncProgress
	return out, convert(p, &out)
}

// rotateSecret starts secret-rotation/<old endpoint> as starter.RotateSecret
// does; a request while that rotation runs joins it (the caller's
// completion is attached to the running one).
func (s *Service) rotateSecret(ctx context.Context, in api.RotateSecretInput, opts nexusrpc.StartOperationOptions) (temporalnexus.WorkflowHandle[api.SecretRotation], error) {
	if err := required("old_endpoint_id", in.OldEndpointID, "new_url", in.NewURL); err != nil {
		return nil, err
	}
	if in.Receiver == "" {
		r, err := starter.ReceiverFromURL(in.NewURL)
		if err != nil {
			return nil, badInput("receiver: %v", err)
		}
		in.Receiver = r
	}
	if in.VerifyTimeout < 0 || in.DecisionTimeout < 0 || in.GracePeriod < 0 {
		return nil, badInput("verify_timeout, decision_timeout and grace_period must not be negative")
	}
	st := s.starter(ctx)
	id := workflows.SecretRotationID(in.OldEndpointID)
	h, err := temporalnexus.ExecuteUntypedWorkflow[api.SecretRotation](ctx, opts, st.StartOptions(workflows.SecretRotationKind, id),
		workflows.SecretRotationWorkflowName, workflows.SecretRotationInput{
			OldEndpointID: in.OldEndpointID, NewURL: in.NewURL, Receiver: in.Receiver,
			VerifyTimeout: workflows.Duration(in.VerifyTimeout), DecisionTimeout: workflows.Duration(in.DecisionTimeout),
			GracePeriod: workflows.Duration(in.GracePeriod), Operator: in.Operator,
		})
	if err != nil {
		return nil, handlerError(err)
	}
	return h, nil
}

// required refuses a request that lacks one of the named fields, given
// as name, value pairs.
func required(pairs ...string) error {
	var missing []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			missing = append(missing, pairs[i])
		}
	}
	if len(missing) > 0 {
		return badInput("%s: is required", strings.Join(missing, ", "))
	}
	return nil
}
