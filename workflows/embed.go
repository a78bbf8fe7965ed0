package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
)

// Names of the embed incident workflow's messages.
const (
	EmbedIncidentWorkflowName = "EmbedIncident"
	// UpdateDecide carries on-call's decision (EmbedDecision) and returns
	// once it has been carried out (EmbedIncidentStatus).
	UpdateDecide = "decide"
	// QueryIncident answers EmbedIncidentStatus.
	QueryIncident = "status"
	// UpdateAwaitOff (EmbedOffRequest) returns once the embed is off
	// (EmbedOffResult), or the reason it could not be turned off. Sent
	// with update-with-start, it opens the incident or joins the open one.
	UpdateAwaitOff = "await-off"
)

// embedDecisionRecorded is the change that records the decision in the
// incident's memo; histories recorded before it replay without.
const embedDecisionRecorded = "embed-decision-recorded"

// embedPatchLocal is the change that sends the incident's PATCHes as
// local activities: the worker runs each one inside the workflow task that
// asked for it, so `embed off` (update-with-start) and `embed on` (an
// update) each cost one workflow task instead of a workflow task, an
// activity task and another workflow task. A worker lost during the PATCH
// loses the workflow task with it; the next worker runs the task again and
// sends the PATCH again under the same idempotency key, which the API
// answers from the first one's stored response. Incidents opened before
// the change (histories without its marker) go on with activities.
const embedPatchLocal = "embed-patch-local"

// Decisions on an embed incident.
const (
	DecisionRestore = "restore" // turn the embed back on, optionally with corrected origins
	DecisionClose   = "close"   // close the incident and leave the embed off
)

// ErrTypeEmbedNotSwitched is the type of the failure of an incident whose
// PATCH failed; its cause is the API's answer.
const ErrTypeEmbedNotSwitched = "EmbedNotSwitched"

// Incident states.
const (
	IncidentTurningOff = "turning-off"
	IncidentOff        = "off"
	IncidentRestoring  = "restoring"
	IncidentRestored   = "restored"
	IncidentClosed     = "closed-embed-off"
)

// EmbedIncidentInput opens an incident: who turned the embed off and why.
type EmbedIncidentInput struct {
	SiteID   string `json:"site_id"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
	// RequestID names the request that opened the incident, so that a
	// later request can tell that it joined an open one.
	RequestID string `json:"request_id,omitempty"`
}

// EmbedOffRequest asks to be told when the embed is off.
type EmbedOffRequest struct {
	RequestID string `json:"request_id,omitempty"`
}

// EmbedOffResult answers UpdateAwaitOff.
type EmbedOffResult struct {
	Status EmbedIncidentStatus `json:"incident"`
	// Joined is true when the incident was already open: no second PATCH
	// was sent.
	Joined bool `json:"joined"`
}

// EmbedDecision is on-call's decision.
type EmbedDecision struct {
	Action         string   `json:"action"`
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	Operator       string   `json:"operator"`
}

// EmbedIncidentStatus answers QueryIncident and UpdateDecide; it is also the
// workflow's result. OffAt and OnAt are omitted until the embed went off
// and came back on (answers recorded before wrote the zero time, which
// reads the same).
type EmbedIncidentStatus struct {
	SiteID    string    `json:"site_id"`
	State     string    `json:"state"`
	Operator  string    `json:"operator"`
	Reason    string    `json:"reason"`
	OpenedAt  time.Time `json:"opened_at"`
	OffAt     time.Time `json:"off_at,omitzero"`
	Decision  string    `json:"decision,omitempty"`
	DecidedBy string    `json:"decided_by,omitempty"`
	OnAt      time.Time `json:"on_at,omitzero"`
	Origins   []string  `json:"allowed_origins,omitempty"`
}

// EmbedIncident turns a site's embed off with a fresh idempotency key,
// records who and why, waits for on-call's decision through UpdateDecide,
// then turns the embed back on with another fresh key (restore), or leaves
// it off (close).
func EmbedIncident(ctx workflow.Context, in EmbedIncidentInput) (EmbedIncidentStatus, error) {
	info := workflow.GetInfo(ctx)
	e := &embedIncident{
		in:    in,
		st:    EmbedIncidentStatus{SiteID: in.SiteID, State: IncidentTurningOff, Operator: in.Operator, Reason: in.Reason, OpenedAt: workflow.Now(ctx)},
		keyOf: func(step string) string { return Key(info.WorkflowExecution.ID, info.FirstRunID, step) },
	}
	if err := e.setup(ctx); err != nil {
		return e.st, err
	}
	return e.run(ctx)
}

type embedIncident struct {
	in       EmbedIncidentInput
	st       EmbedIncidentStatus
	decision *EmbedDecision
	done     bool
	err      error // why carrying out the decision failed
	offErr   error // why the embed could not be turned off
	keyOf    func(step string) string
}

func (e *embedIncident) setup(ctx workflow.Context) error {
	if e.in.SiteID == "" || e.in.Reason == "" {
		return errors.New("an embed incident needs a site id and a reason")
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{"operator": e.in.Operator, "reason": e.in.Reason, "opened_at": e.st.OpenedAt}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryIncident, func() (EmbedIncidentStatus, error) { return e.st, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateAwaitOff, func(ctx workflow.Context, req EmbedOffRequest) (EmbedOffResult, error) {
		if err := workflow.Await(ctx, func() bool { return e.st.State != IncidentTurningOff || e.offErr != nil }); err != nil {
			return EmbedOffResult{}, err
		}
		return EmbedOffResult{Status: e.st, Joined: req.RequestID == "" || req.RequestID != e.in.RequestID}, e.offErr
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide,
		func(ctx workflow.Context, d EmbedDecision) (EmbedIncidentStatus, error) {
			e.decision = &d
			if err := workflow.Await(ctx, func() bool { return e.done }); err != nil {
				return e.st, err
			}
			return e.st, e.err
		},
		workflow.UpdateHandlerOptions{Validator: e.validate},
	)
}

// validate refuses a decision before it is written to history.
func (e *embedIncident) validate(_ workflow.Context, d EmbedDecision) error {
	if e.decision != nil {
		return fmt.Errorf("this incident was already decided (%s by %s)", e.decision.Action, e.decision.Operator)
	}
	switch d.Action {
	case DecisionRestore:
		if err := agentsite.ValidateOrigins(d.AllowedOrigins); err != nil {
			return fmt.Errorf("corrected allowed_origins refused: %w", err)
		}
	case DecisionClose:
		if len(d.AllowedOrigins) > 0 {
			return errors.New("close keeps the embed off; allowed_origins apply only to restore")
		}
	default:
		return fmt.Errorf("action %q: use %q or %q", d.Action, DecisionRestore, DecisionClose)
	}
	return nil
}

// apiLocalActivity runs an incident's PATCH as a local activity with the
// same attempts as apiActivity: 20 s each, backing off to a minute, at
// most 12. A local activity's retries are bounded by its schedule-to-close
// timeout too, which defaults to one attempt's: 15 minutes leaves the
// attempts as the bound. A backoff longer than the workflow task's timeout
// waits on a workflow timer, as the SDK does for local activities.
func apiLocalActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 15 * time.Minute,
		StartToCloseTimeout:    20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    12,
		},
	})
}

func (e *embedIncident) run(ctx workflow.Context) (EmbedIncidentStatus, error) {
	setEmbed := func(in activities.SetEmbedInput) error {
		var a *activities.Activities
		return workflow.ExecuteActivity(apiActivity(ctx), a.SetEmbed, in).Get(ctx, nil)
	}
	if workflow.GetVersion(ctx, embedPatchLocal, workflow.DefaultVersion, 1) >= 1 {
		setEmbed = func(in activities.SetEmbedInput) error {
			var a *activities.Activities
			err := workflow.ExecuteLocalActivity(apiLocalActivity(ctx), a.SetEmbed, in).Get(ctx, nil)
			if err == nil || temporal.IsCanceledError(err) {
				return err
			}
			// A local activity's failure reaches the workflow without the
			// ActivityError around it by which callers tell a PATCH that
			// failed from a decision the validator refused: name it.
			what := "turning the embed off"
			if in.Enabled {
				what = "turning the embed on"
			}
			return temporal.NewApplicationErrorWithCause(what+" failed", ErrTypeEmbedNotSwitched, err)
		}
	}
	off := activities.SetEmbedInput{SiteID: e.in.SiteID, Enabled: false, IdempotencyKey: e.keyOf("embed-off")}
	if err := setEmbed(off); err != nil {
		// Whoever waits for the embed to go off hears why it did not.
		e.offErr = err
		_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		return e.st, err
	}
	e.st.State, e.st.OffAt = IncidentOff, workflow.Now(ctx)
	workflow.GetLogger(ctx).Info("embed off; waiting for on-call", "site_id", e.in.SiteID)

	if err := workflow.Await(ctx, func() bool { return e.decision != nil }); err != nil {
		return e.st, err
	}
	d := *e.decision
	e.st.Decision, e.st.DecidedBy = d.Action, d.Operator
	if workflow.GetVersion(ctx, embedDecisionRecorded, workflow.DefaultVersion, 1) >= 1 {
		// Who decided, and the origins they gave, stay on the incident
		// (memo) beside who opened it; Temporal also records the identity
		// of the client that sent the decision with the update.
		memo := map[string]any{"decision": d.Action, "decided_by": d.Operator}
		if len(d.AllowedOrigins) > 0 {
			memo["allowed_origins"] = d.AllowedOrigins
		}
		if err := workflow.UpsertMemo(ctx, memo); err != nil {
			return e.st, err
		}
	}
	if d.Action == DecisionRestore {
		e.st.State, e.st.Origins = IncidentRestoring, d.AllowedOrigins
		on := activities.SetEmbedInput{SiteID: e.in.SiteID, Enabled: true, AllowedOrigins: d.AllowedOrigins, IdempotencyKey: e.keyOf("embed-on")}
		if err := setEmbed(on); err != nil {
			e.err, e.done = err, true
			_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
			return e.st, err
		}
		e.st.State, e.st.OnAt = IncidentRestored, workflow.Now(ctx)
	} else {
		e.st.State = IncidentClosed
	}
	e.done = true
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return e.st, err
	}
	return e.st, nil
}
