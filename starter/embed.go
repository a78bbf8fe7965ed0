package starter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/workflows"
)

// EmbedOff opens an embed incident for the site, which turns the embed off,
// and returns once the service has acknowledged the PATCH — or at once with
// the workflow's root cause when it could not: a *SiteNotFoundError for a
// site the API does not know, else a *WorkflowFailedError (a refused key). It uses update-with-start: if an incident
// is already open it is joined, no second PATCH is sent, and the result
// says Joined.
//
// It is one call to Temporal. The incident's search attributes go with
// the start without asking first whether the namespace has them: a worker
// refuses to start in a namespace without them, so they are there wherever
// an incident is carried out. A namespace without them refuses the start
// (nothing was started), and EmbedOff says so through Warn and starts it
// again without them.
func (s *Starter) EmbedOff(ctx context.Context, siteID, operator, reason string) (workflows.EmbedOffResult, error) {
	id := workflows.EmbedIncidentID(siteID)
	req := requestID()
	opts := s.options(workflows.EmbedIncidentKind, id)
	opts.TypedSearchAttributes = incidentSearchAttributes(siteID, operator)
	var (
		h   client.WorkflowUpdateHandle
		res workflows.EmbedOffResult
	)
	updateWithStart := func() (client.WorkflowUpdateHandle, error) {
		// A start operation is good for one call: each try makes its own.
		op := s.o.Client.NewWithStartWorkflowOperation(opts, workflows.EmbedIncidentWorkflowName,
			workflows.EmbedIncidentInput{SiteID: siteID, Operator: operator, Reason: reason, RequestID: req})
		return s.o.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateID:     req,
				WorkflowID:   id,
				UpdateName:   workflows.UpdateAwaitOff,
				Args:         []any{workflows.EmbedOffRequest{RequestID: req}},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
	}
	// Every try carries the same update ID, so Temporal answers a repeated
	// one with the first one's outcome.
	err := s.Patiently(ctx, "turning the embed off through "+id, func() error {
		var err error
		h, err = updateWithStart()
		if err != nil && opts.TypedSearchAttributes.Size() > 0 && refusedSearchAttributes(err) {
			s.warn("namespace %s lacks the search attributes %s and %s (Temporal said: %s); the incident is recorded without them (run deploy/temporal-setup.sh)",
				s.namespace(), SearchAttrSiteID, SearchAttrOperator, innermost(err.Error()))
			opts.TypedSearchAttributes = temporal.SearchAttributes{}
			h, err = updateWithStart()
		}
		if err != nil {
			return err
		}
		return h.Get(ctx, &res)
	})
	if err != nil {
		runID := ""
		if h != nil {
			runID = h.RunID()
		}
		err = waitErr(ctx, id, runID, err)
		var failed *WorkflowFailedError
		if errors.As(err, &failed) && SiteMissing(failed.Cause) {
			return res, &SiteNotFoundError{SiteID: siteID, Failed: failed}
		}
		return res, err
	}
	return res, nil
}

// SiteMissing reports whether f, the failure of an embed incident, is the
// API's answer that the site does not exist (404): its PATCH is the only
// call an incident makes, and a site is all it names.
func SiteMissing(f Failure) bool {
	return f.Type == activities.ErrTypeNotFound || f.Status == http.StatusNotFound
}

// SiteNotFoundError is EmbedOff for a site the API does not know: the
// PATCH was answered 404, nothing was turned off, and the incident ended
// at once. It wraps the incident's *WorkflowFailedError.
type SiteNotFoundError struct {
	SiteID string
	Failed *WorkflowFailedError
}

func (e *SiteNotFoundError) Error() string {
	f := e.Failed.Cause
	answer := "404"
	if f.Code != "" {
		answer += " " + f.Code
	}
	if f.RequestID != "" {
		answer += ", request id " + f.RequestID
	}
	return fmt.Sprintf("site %s does not exist (the Agent-Site API answered %s): nothing was turned off, and %s ended at once; check the site id", e.SiteID, answer, e.Failed.WorkflowID)
}

func (e *SiteNotFoundError) Unwrap() error { return e.Failed }

// IncidentNotOff says, for the status of an embed incident that ended
// while it was still turning the embed off, why it never did: the site
// does not exist, or its PATCH failed (the failure says how). ok is false
// for any other status.
func IncidentNotOff(st Status) (why string, ok bool) {
	d, isIncident := st.Detail.(*workflows.EmbedIncidentStatus)
	if !isIncident || st.Status == "Running" || d.State != workflows.IncidentTurningOff {
		return "", false
	}
	if st.Failure != nil && SiteMissing(*st.Failure) {
		return fmt.Sprintf("never turned off: site %s does not exist", d.SiteID), true
	}
	return fmt.Sprintf("never turned off: the incident ended (%s) before the API acknowledged the PATCH", st.Status), true
}

// refusedSearchAttributes reports whether Temporal refused a start for the
// incident's search attributes: not registered in the namespace, or not as
// keywords.
func refusedSearchAttributes(err error) bool {
	var invalid *serviceerror.InvalidArgument
	if !errors.As(err, &invalid) {
		return false
	}
	msg := invalid.Error()
	return strings.Contains(msg, SearchAttrSiteID) || strings.Contains(msg, SearchAttrOperator)
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

// ErrNoOpenIncident is returned by EmbedOn and EmbedClose when the site has
// no open incident to decide; it matches ErrNotFound.
var ErrNoOpenIncident = fmt.Errorf("no open embed incident for this site; open one with `siteops embed off --site ID --reason TEXT`: %w", ErrNotFound)

func (s *Starter) decide(ctx context.Context, siteID string, d workflows.EmbedDecision) (workflows.EmbedIncidentStatus, error) {
	var st workflows.EmbedIncidentStatus
	id := workflows.EmbedIncidentID(siteID)
	// The decision goes to the incident's current run without a look-up
	// first: Temporal answers NotFound when there is no run or it has
	// closed, and an open run's validator refuses what does not apply.
	err := s.update(ctx, "deciding "+id, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   workflows.UpdateDecide,
		Args:         []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	}, &st)
	if isNotFound(err) && ctx.Err() == nil {
		return st, fmt.Errorf("site %s: %w", siteID, ErrNoOpenIncident)
	}
	if err != nil {
		return st, decideErr(ctx, id, "", err)
	}
	return st, nil
}

// update sends an update and reads its outcome into valuePtr, trying again
// while Temporal is unavailable. Every try carries the same update ID, so
// a try whose answer was lost is answered with its outcome, never applied
// twice.
func (s *Starter) update(ctx context.Context, what string, o client.UpdateWorkflowOptions, valuePtr any) error {
	if o.UpdateID == "" {
		o.UpdateID = requestID()
	}
	return s.Patiently(ctx, what, func() error {
		h, err := s.o.Client.UpdateWorkflow(ctx, o)
		if err != nil {
			return err
		}
		return h.Get(ctx, valuePtr)
	})
}

// RejectedError is a message a workflow refused before acting on it: a
// decision that does not apply, corrected origins that are not exact.
type RejectedError struct {
	WorkflowID string
	Reason     string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%s refused it: %s", e.WorkflowID, e.Reason)
}

// decideErr tells a refused update (its validator said no: the input does
// not apply) from a failure to carry it out (an activity failed, or the
// incident's PATCH, a local activity, whose failure the workflow names
// ErrTypeEmbedNotSwitched).
func decideErr(ctx context.Context, id, runID string, err error) error {
	var actErr *temporal.ActivityError
	var app *temporal.ApplicationError
	if ctx.Err() == nil && !errors.As(err, &actErr) && errors.As(err, &app) && app.Type() != workflows.ErrTypeEmbedNotSwitched {
		return &RejectedError{WorkflowID: id, Reason: app.Message()}
	}
	return waitErr(ctx, id, runID, err)
}
