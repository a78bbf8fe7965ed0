package webhookingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// RelayStore is the part of the store the relay uses.
type RelayStore interface {
	ClaimEvents(ctx context.Context, limit int, lease time.Duration) ([]store.InboxEvent, error)
	MarkDispatchedBatch(ctx context.Context, byOutcome map[string][]string) error
	MarkFailed(ctx context.Context, eventID, reason string, next time.Time) error
	SiteWorkflow(ctx context.Context, siteID string) (string, error)
	RotationFor(ctx context.Context, endpointID string) (string, error)
	PurgeInbox(ctx context.Context, cutoff time.Time) (int, error)
	InboxStatus(ctx context.Context) (store.InboxStatus, error)
}

var _ RelayStore = (*store.Store)(nil)

// Signaler is the part of the Temporal client the relay uses.
type Signaler interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
}

// Outcomes of a dispatched inbox event.
const (
	OutcomeSignalled  = "signalled"   // the target workflow got the event
	OutcomeNoTarget   = "no-target"   // no workflow is known for the event's site
	OutcomeTargetGone = "target-gone" // the target workflow has ended
	OutcomeIgnored    = "ignored"     // a type no workflow waits for
	OutcomeMalformed  = "malformed"   // data without the ids the route needs
)

// Relay takes undispatched inbox events and signals the workflows they
// concern, each with its event id so that workflows deduplicate again. It
// is safe to run in several replicas: events are leased when claimed.
type Relay struct {
	Store     RelayStore
	Temporal  Signaler
	TaskQueue string
	Logger    *slog.Logger
	Metrics   *Metrics

	// Batch is how many events one claim takes (100).
	Batch int
	// Parallel is how many signals are in flight at once (16).
	Parallel int
	// Lease is how long a claimed event is hidden from other replicas (30 s).
	Lease time.Duration
	// Idle is how long to wait for new events when the inbox is empty (1 s);
	// Wake cuts it short.
	Idle time.Duration
	// MaxBackoff caps the delay before a failed event is tried again (5 m).
	MaxBackoff time.Duration
	// Retention is how long dispatched events are kept (30 days).
	Retention time.Duration
	// DispatchTimeout bounds one dispatch (10 s).
	DispatchTimeout time.Duration
	Now             func() time.Time

	wake     chan struct{}
	initOnce sync.Once
}

func (r *Relay) init() {
	r.initOnce.Do(func() {
		if r.Batch == 0 {
			r.Batch = 100
		}
		if r.Parallel == 0 {
			r.Parallel = 16
		}
		if r.Lease == 0 {
			r.Lease = 30 * time.Second
		}
		if r.Idle == 0 {
			r.Idle = time.Second
		}
		if r.MaxBackoff == 0 {
			r.MaxBackoff = 5 * time.Minute
		}
		if r.Retention == 0 {
			r.Retention = 30 * 24 * time.Hour
		}
		if r.DispatchTimeout == 0 {
			r.DispatchTimeout = 10 * time.Second
		}
		if r.Now == nil {
			r.Now = time.Now
		}
		if r.Logger == nil {
			r.Logger = slog.New(slog.DiscardHandler)
		}
		r.wake = make(chan struct{}, 1)
	})
}

// Wake tells the relay that an event was recorded; it never blocks.
func (r *Relay) Wake() {
	r.init()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx is done.
func (r *Relay) Run(ctx context.Context) error {
	r.init()
	lastPurge := time.Time{}
	for ctx.Err() == nil {
		n, err := r.DispatchOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.Logger.Error("relay: claiming events failed; retrying", "error", err)
		}
		if r.Now().Sub(lastPurge) > time.Hour {
			lastPurge = r.Now()
			if purged, err := r.Store.PurgeInbox(ctx, r.Now().Add(-r.Retention)); err == nil && purged > 0 {
				r.Logger.Info("relay: purged old inbox events", "count", purged)
			}
		}
		r.updateGauges(ctx)
		if n == r.Batch {
			continue // more may be waiting
		}
		t := time.NewTimer(r.Idle)
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

func (r *Relay) updateGauges(ctx context.Context) {
	if r.Metrics == nil {
		return
	}
	st, err := r.Store.InboxStatus(ctx)
	if err != nil {
		return
	}
	r.Metrics.Pending.Set(float64(st.Undispatched))
	lag := 0.0
	if !st.OldestPending.IsZero() {
		lag = r.Now().Sub(st.OldestPending).Seconds()
	}
	r.Metrics.RelayLag.Set(lag)
}

// DispatchOnce claims one batch and dispatches it; it returns how many
// events it claimed.
func (r *Relay) DispatchOnce(ctx context.Context) (int, error) {
	r.init()
	evs, err := r.Store.ClaimEvents(ctx, r.Batch, r.Lease)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	sem := make(chan struct{}, r.Parallel)
	type handled struct{ id, typ, outcome string }
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done []handled
	)
	for _, ev := range evs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if outcome, ok := r.handle(ctx, ev); ok {
				mu.Lock()
				done = append(done, handled{ev.EventID, ev.EventType, outcome})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	byOutcome := map[string][]string{}
	for _, h := range done {
		byOutcome[h.outcome] = append(byOutcome[h.outcome], h.id)
	}
	if err := r.Store.MarkDispatchedBatch(ctx, byOutcome); err != nil {
		// The leases run out and the events are dispatched again; the
		// workflows deduplicate by event id.
		return len(evs), err
	}
	if r.Metrics != nil {
		for _, h := range done {
			r.Metrics.Dispatched.WithLabelValues(h.typ, h.outcome).Inc()
		}
	}
	return len(evs), nil
}

// handle dispatches one event; it reports the outcome when the event is
// handled, or records the failure for a later attempt.
func (r *Relay) handle(ctx context.Context, ev store.InboxEvent) (string, bool) {
	// A Temporal that is down must not hold the batch: each dispatch gets
	// a deadline, and a failure is retried later with backoff.
	dctx, cancel := context.WithTimeout(ctx, r.DispatchTimeout)
	dctx, span := dispatchSpan(dctx, ev.TraceContext, ev.EventID, ev.EventType)
	outcome, err := r.dispatch(dctx, ev)
	span.SetAttributes(attribute.String("siteops.outcome", outcome))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "dispatch failed")
	}
	span.End()
	cancel()
	if err != nil {
		delay := min(time.Duration(1<<min(ev.Attempts, 20))*time.Second, r.MaxBackoff)
		if markErr := r.Store.MarkFailed(ctx, ev.EventID, err.Error(), r.Now().Add(delay)); markErr != nil {
			r.Logger.Error("relay: recording a failed dispatch", "event_id", ev.EventID, "error", markErr)
		}
		if r.Metrics != nil {
			r.Metrics.Retries.Inc()
		}
		r.Logger.Warn("relay: dispatch failed; will retry", "event_id", ev.EventID, "event_type", ev.EventType, "attempt", ev.Attempts+1, "retry_in", delay, "error", err)
		return "", false
	}
	r.Logger.Debug("relay: dispatched", "event_id", ev.EventID, "event_type", ev.EventType, "outcome", outcome)
	return outcome, true
}

// siteData is what the relay reads of an event's data.
type siteData struct {
	SiteID      string `json:"site_id"`
	LeadID      string `json:"lead_id"`
	KnowledgeID string `json:"knowledge_id"`
	Status      string `json:"status"`
}

// dispatch routes one event. A nil error means the event is handled and
// outcome says how; an error means try again later.
func (r *Relay) dispatch(ctx context.Context, ev store.InboxEvent) (string, error) {
	var env webhook.Envelope
	if err := json.Unmarshal(ev.Body, &env); err != nil {
		return OutcomeMalformed, nil
	}
	var d siteData
	_ = json.Unmarshal(env.Data, &d)

	if ev.EventType == store.EndpointVerifiedType {
		return r.endpointVerified(ctx, ev)
	}
	switch webhook.EventType(ev.EventType) {
	case webhook.LeadCreated:
		if d.SiteID == "" {
			return OutcomeMalformed, nil
		}
		id := workflows.LeadSyncID(d.SiteID)
		_, err := r.Temporal.SignalWithStartWorkflow(ctx, id, workflows.SignalLeadCreated,
			workflows.LeadCreatedSignal{EventID: ev.EventID, LeadID: d.LeadID},
			client.StartWorkflowOptions{ID: id, TaskQueue: r.TaskQueue, WorkflowIDReusePolicy: workflows.LeadSyncPolicy.Reuse},
			workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: d.SiteID})
		if err != nil {
			return "", fmt.Errorf("signal-with-start %s: %w", id, err)
		}
		return OutcomeSignalled, nil
	case webhook.KnowledgeReady:
		return r.signalSite(ctx, d.SiteID, workflows.SignalKnowledgeReady, workflows.KnowledgeReadySignal{EventID: ev.EventID, KnowledgeID: d.KnowledgeID})
	case webhook.SitePublished, webhook.SiteUnpublished:
		return r.signalSite(ctx, d.SiteID, workflows.SignalSiteStatus, workflows.SiteStatusSignal{EventID: ev.EventID, Type: ev.EventType, Status: d.Status})
	}
	// conversation.*, broadcast.sent, the retired domain.activated and
	// types added later: recorded, nothing waits for them.
	return OutcomeIgnored, nil
}

// endpointVerified tells a rotation workflow that its new endpoint got a
// verified delivery.
func (r *Relay) endpointVerified(ctx context.Context, ev store.InboxEvent) (string, error) {
	wf, err := r.Store.RotationFor(ctx, ev.EndpointID)
	if errors.Is(err, store.ErrNotFound) {
		return OutcomeNoTarget, nil
	}
	if err != nil {
		return "", err
	}
	var env webhook.Envelope
	var d struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(ev.Body, &env) == nil {
		_ = json.Unmarshal(env.Data, &d)
	}
	sig := workflows.VerifiedDeliverySignal{EventID: d.EventID, EndpointID: ev.EndpointID}
	if err := r.Temporal.SignalWorkflow(ctx, wf, "", workflows.SignalVerifiedDelivery, sig); err != nil {
		if isNotFound(err) {
			return OutcomeTargetGone, nil
		}
		return "", fmt.Errorf("signalling %s: %w", wf, err)
	}
	return OutcomeSignalled, nil
}

// signalSite signals the onboarding workflow that owns a site.
func (r *Relay) signalSite(ctx context.Context, siteID, signal string, arg any) (string, error) {
	if siteID == "" {
		return OutcomeMalformed, nil
	}
	wf, err := r.Store.SiteWorkflow(ctx, siteID)
	if errors.Is(err, store.ErrNotFound) {
		return OutcomeNoTarget, nil
	}
	if err != nil {
		return "", err
	}
	if err := r.Temporal.SignalWorkflow(ctx, wf, "", signal, arg); err != nil {
		if isNotFound(err) {
			return OutcomeTargetGone, nil
		}
		return "", fmt.Errorf("signalling %s: %w", wf, err)
	}
	return OutcomeSignalled, nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
