package starter

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/workflows"
)

// TextStore keeps knowledge texts by hash.
type TextStore interface {
	PutKnowledgeText(ctx context.Context, text string) (string, error)
}

// Starter starts and drives siteops workflows.
type Starter struct {
	Client    client.Client
	Texts     TextStore // needed by Onboard only
	TaskQueue string
	// Namespace is where the search attributes of incidents are looked up;
	// "default" when empty.
	Namespace string
}

// Search attributes an embed incident carries where the server has them
// registered (temporal operator search-attribute create --name ... --type Keyword).
const (
	SearchAttrSiteID   = "SiteopsSiteID"
	SearchAttrOperator = "SiteopsOperator"
)

// incidentSearchAttributes returns the incident's search attributes if the
// namespace has them registered, and none otherwise: an unregistered
// attribute would fail the start.
func (s *Starter) incidentSearchAttributes(ctx context.Context, siteID, operator string) temporal.SearchAttributes {
	ns := s.Namespace
	if ns == "" {
		ns = "default"
	}
	resp, err := s.Client.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return temporal.SearchAttributes{}
	}
	custom := resp.GetCustomAttributes()
	if custom[SearchAttrSiteID] != enumspb.INDEXED_VALUE_TYPE_KEYWORD || custom[SearchAttrOperator] != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
		return temporal.SearchAttributes{}
	}
	return temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(SearchAttrSiteID).ValueSet(siteID),
		temporal.NewSearchAttributeKeyKeyword(SearchAttrOperator).ValueSet(operator),
	)
}

func (s *Starter) options(id string, p workflows.IDPolicy) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                s.TaskQueue,
		WorkflowIDReusePolicy:    p.Reuse,
		WorkflowIDConflictPolicy: p.Conflict,
	}
}

// ErrAlreadyOnboarded is returned when the slug's onboarding is running or
// has completed.
var ErrAlreadyOnboarded = errors.New("this slug is already being onboarded or was onboarded; see `siteops status onboarding/<slug>`")

// Onboard stores the texts, then starts onboarding/<slug>.
func (s *Starter) Onboard(ctx context.Context, p Prepared) (client.WorkflowRun, error) {
	if s.Texts == nil && len(p.Texts) > 0 {
		return nil, errors.New("starter: onboarding with knowledge texts needs the store (SITEOPS_DATABASE_URL)")
	}
	for hash, text := range p.Texts {
		got, err := s.Texts.PutKnowledgeText(ctx, text)
		if err != nil {
			return nil, err
		}
		if got != hash {
			return nil, fmt.Errorf("starter: stored text hash %s differs from %s", got, hash)
		}
	}
	id := workflows.OnboardingID(p.Input.Site.Slug)
	opts := s.options(id, workflows.OnboardingPolicy)
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	run, err := s.Client.ExecuteWorkflow(ctx, opts, workflows.OnboardingWorkflowName, p.Input)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, fmt.Errorf("%s: %w", id, ErrAlreadyOnboarded)
	}
	return run, err
}

// SyncLeads starts the site's lead sync if it is not running, and asks it
// to sync now (from the start when full).
func (s *Starter) SyncLeads(ctx context.Context, siteID string, full bool) (client.WorkflowRun, error) {
	id := workflows.LeadSyncID(siteID)
	opts := s.options(id, workflows.LeadSyncPolicy)
	return s.Client.SignalWithStartWorkflow(ctx, id, workflows.SignalSync, workflows.SyncRequest{Full: full},
		opts, workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: siteID, Full: full})
}

// LeadProgress queries a site's lead sync.
func (s *Starter) LeadProgress(ctx context.Context, siteID string) (workflows.LeadSyncProgress, error) {
	var p workflows.LeadSyncProgress
	v, err := s.Client.QueryWorkflow(ctx, workflows.LeadSyncID(siteID), "", workflows.QueryProgress)
	if err != nil {
		return p, err
	}
	return p, v.Get(&p)
}

// EmbedOff opens an embed incident for the site, which turns the embed off.
// If one is already open it is joined: no second PATCH is sent, and joined
// is true.
func (s *Starter) EmbedOff(ctx context.Context, siteID, operator, reason string) (run client.WorkflowRun, joined bool, err error) {
	id := workflows.EmbedIncidentID(siteID)
	if d, err := s.Client.DescribeWorkflowExecution(ctx, id, ""); err == nil &&
		d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		joined = true
	}
	opts := s.options(id, workflows.EmbedIncidentPolicy)
	opts.TypedSearchAttributes = s.incidentSearchAttributes(ctx, siteID, operator)
	run, err = s.Client.ExecuteWorkflow(ctx, opts, workflows.EmbedIncidentWorkflowName,
		workflows.EmbedIncidentInput{SiteID: siteID, Operator: operator, Reason: reason})
	return run, joined, err
}

// EmbedOn decides the site's open incident: restore the embed, with
// corrected origins when given. It returns once the embed is back on.
func (s *Starter) EmbedOn(ctx context.Context, siteID string, origins []string, operator string) (workflows.EmbedIncidentStatus, error) {
	return s.decide(ctx, siteID, workflows.EmbedDecision{Action: workflows.DecisionRestore, AllowedOrigins: origins, Operator: operator})
}

// EmbedClose closes the site's open incident and leaves the embed off.
func (s *Starter) EmbedClose(ctx context.Context, siteID, operator string) (workflows.EmbedIncidentStatus, error) {
	return s.decide(ctx, siteID, workflows.EmbedDecision{Action: workflows.DecisionClose, Operator: operator})
}

// ErrNoOpenIncident is returned by EmbedOn when the site has no open
// incident to decide.
var ErrNoOpenIncident = errors.New("no open embed incident for this site; open one with `siteops embed off --site ID --reason TEXT`")

func (s *Starter) decide(ctx context.Context, siteID string, d workflows.EmbedDecision) (workflows.EmbedIncidentStatus, error) {
	var st workflows.EmbedIncidentStatus
	id := workflows.EmbedIncidentID(siteID)
	desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) || (err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING) {
		return st, fmt.Errorf("site %s: %w", siteID, ErrNoOpenIncident)
	}
	if err != nil {
		return st, err
	}
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   workflows.UpdateDecide,
		Args:         []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return st, err
	}
	return st, h.Get(ctx, &st)
}

// Status describes any siteops workflow and, when it answers one, its
// status query.
type Status struct {
	WorkflowID string    `json:"workflow_id"`
	RunID      string    `json:"run_id"`
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	StartedAt  time.Time `json:"started_at"`
	ClosedAt   time.Time `json:"closed_at,omitzero"`
	Detail     any       `json:"detail,omitempty"`
}

// Status looks a workflow up by ID.
func (s *Starter) Status(ctx context.Context, workflowID string) (Status, error) {
	d, err := s.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return Status{}, fmt.Errorf("no workflow with ID %s (IDs look like onboarding/<slug>, lead-sync/<site_id>, embed-incident/<site_id>)", workflowID)
		}
		return Status{}, err
	}
	info := d.GetWorkflowExecutionInfo()
	st := Status{
		WorkflowID: workflowID,
		RunID:      info.GetExecution().GetRunId(),
		Type:       info.GetType().GetName(),
		Status:     info.GetStatus().String(),
		StartedAt:  info.GetStartTime().AsTime(),
	}
	if info.GetCloseTime() != nil {
		st.ClosedAt = info.GetCloseTime().AsTime()
	}
	var query string
	var detail any
	switch st.Type {
	case workflows.OnboardingWorkflowName:
		query, detail = workflows.QueryStatus, &workflows.OnboardingStatus{}
	case workflows.LeadSyncWorkflowName:
		query, detail = workflows.QueryProgress, &workflows.LeadSyncProgress{}
	case workflows.EmbedIncidentWorkflowName:
		query, detail = workflows.QueryIncident, &workflows.EmbedIncidentStatus{}
	}
	if query != "" {
		if v, err := s.Client.QueryWorkflow(ctx, workflowID, st.RunID, query); err == nil && v.Get(detail) == nil {
			st.Detail = detail
		}
	}
	return st, nil
}
