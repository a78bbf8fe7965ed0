package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
)

// target is the workflow a dispatch reached or tried, and the run when a
// SignalWithStart said which (a plain signal does not).
type target struct{ workflow, run string }

// handle dispatches one job and says what became of each of its events:
// an outcome, or a failure to try again after a backoff (or, after
// MaxAttempts failures in a row, never again: a dead letter).
func (r *Relay) handle(ctx context.Context, j *job) []store.Dispatch {
	first := j.evs[0]
	// A Temporal that is down must not hold the batch: each dispatch gets
	// a deadline, and a failure is retried later with backoff.
	dctx, cancel := context.WithTimeout(ctx, r.opts.DispatchTimeout)
	dctx, span := dispatchSpan(dctx, j.evs)
	var outcome string
	var to target
	var err error
	if j.key != "" {
		outcome, to, err = r.send(dctx, j.route, j.evs, EventData{SiteID: j.site})
	} else {
		outcome, to, err = r.dispatch(dctx, first)
	}
	span.SetAttributes(attribute.String("siteops.outcome", outcome))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "dispatch failed")
	}
	span.End()
	// Read before cancel, which ends dctx either way: whether the dispatch
	// ran out of time, the cause a bare "context deadline exceeded" hides.
	// gRPC's own timer for the same deadline may end the call a moment
	// before dctx's fires, so a call that ended with less than a tenth of
	// its time left ran out of it too.
	deadline, _ := dctx.Deadline()
	outOfTime := errors.Is(dctx.Err(), context.DeadlineExceeded) || time.Until(deadline) < r.opts.DispatchTimeout/10
	cancel()
	ds := make([]store.Dispatch, len(j.evs))
	for i, ev := range j.evs {
		ds[i] = store.Dispatch{EventID: ev.EventID, Outcome: outcome, WorkflowID: to.workflow, RunID: to.run}
	}
	if err == nil {
		r.opts.Logger.Debug("relay: dispatched", "event_id", first.EventID, "event_type", TypeLabel(first), "events", len(j.evs), "outcome", outcome)
		return ds
	}
	r.failed(j, ds, err, outOfTime)
	return ds
}

// EventData is what the relay reads of an event's data: the ids its route
// needs and what its signal carries.
type EventData struct {
	SiteID      string `json:"site_id"`
	LeadID      string `json:"lead_id"`
	KnowledgeID string `json:"knowledge_id"`
	Status      string `json:"status"`
}

// readData reads an event's data; false when its body is not an envelope.
// It calls the envelope's own decoder, which checks the body's syntax as
// it decodes: through json.Unmarshal the body would be scanned once more
// before.
func readData(ev store.InboxEvent) (EventData, bool) {
	var env webhook.Envelope
	if err := env.UnmarshalJSON(ev.Body); err != nil {
		return EventData{}, false
	}
	var d EventData
	_ = json.Unmarshal(env.Data, &d)
	return d, true
}

// dispatch routes one event by its row of the route table. A nil error
// means the event is handled and outcome says how; an error means try
// again later. The target is the workflow it reached or tried, when there
// was one.
func (r *Relay) dispatch(ctx context.Context, ev store.InboxEvent) (string, target, error) {
	rt, known := RouteOf(ev)
	var d EventData
	switch ev.Kind {
	case store.KindEndpointVerified:
	case store.KindWebhook, "":
		var ok bool
		if d, ok = readData(ev); !ok {
			return store.OutcomeMalformed, target{}, nil
		}
	default:
		return store.OutcomeIgnored, target{}, nil
	}
	if !known || !rt.Routed() {
		// conversation.*, broadcast.sent, the retired domain.activated and
		// types added later: recorded, nothing waits for them.
		return store.OutcomeIgnored, target{}, nil
	}
	return r.send(ctx, rt, []store.InboxEvent{ev}, d)
}

// send signals the target of rt with evs, whose data (of the first) is d.
func (r *Relay) send(ctx context.Context, rt Route, evs []store.InboxEvent, d EventData) (string, target, error) {
	var (
		wf  string
		err error
	)
	switch rt.Via {
	case ViaSite:
		if d.SiteID == "" {
			return store.OutcomeMalformed, target{}, nil
		}
		if rt.Start != nil {
			return r.signalOrStart(ctx, rt, d.SiteID, rt.Arg(evs, d))
		}
		wf = rt.Target.ID(d.SiteID)
	case ViaShard:
		// A shard's job carries its shard key where a site's carries the site.
		return r.signalOrStart(ctx, rt, d.SiteID, rt.Arg(evs, d))
	case ViaSiteWorkflow:
		if d.SiteID == "" {
			return store.OutcomeMalformed, target{}, nil
		}
		wf, err = r.opts.Store.SiteWorkflow(ctx, d.SiteID)
	case ViaEndpoint:
		wf, err = r.opts.Store.RotationFor(ctx, evs[0].EndpointID)
	default:
		return "", target{}, fmt.Errorf("route %s: no way to its target (Via %d)", rt.Type, rt.Via)
	}
	if errors.Is(err, store.ErrNotFound) {
		return store.OutcomeNoTarget, target{}, nil
	}
	if err != nil {
		return "", target{}, err
	}
	return r.signal(ctx, wf, rt.Signal, rt.Arg(evs, d))
}

// signalOrStart signals the target of rt for key, starting it if needed.
// Nearly always it runs already (a lead sync runs from its site's
// onboarding on), and a plain signal to a running workflow costs Temporal
// less than a SignalWithStart: 2.5 against 3.5 ms of the dev server's CPU
// per call (BenchmarkRelayDispatch's raw calls both ways, bench/README.md).
// So it signals first, and only a target that is not running (never
// started, or ended: what signal calls gone) gets the SignalWithStart, one
// call more. Either way the target runs and has the signal once the call
// returns, as with SignalWithStart alone; a plain signal does not say
// which run it reached, so the event's record then has no run id.
func (r *Relay) signalOrStart(ctx context.Context, rt Route, key string, arg any) (string, target, error) {
	id := rt.Target.ID(key)
	if outcome, to, err := r.signal(ctx, id, rt.Signal, arg); err != nil || outcome != store.OutcomeTargetGone {
		return outcome, to, err
	}
	run, err := r.opts.Temporal.SignalWithStartWorkflow(ctx, id, rt.Signal, arg,
		client.StartWorkflowOptions{ID: id, TaskQueue: r.opts.TaskQueue, WorkflowIDReusePolicy: rt.Target.Policy.Reuse, Priority: rt.Target.Priority(key)},
		rt.Target.Name, rt.Start(key))
	if err != nil {
		return "", target{workflow: id}, fmt.Errorf("signal-with-start %s: %w", id, err)
	}
	to := target{workflow: id}
	if run != nil {
		to.run = run.GetRunID()
	}
	return store.OutcomeSignalled, to, nil
}

// signal signals the running workflow wf; an ended one is target-gone.
func (r *Relay) signal(ctx context.Context, wf, signal string, arg any) (string, target, error) {
	to := target{workflow: wf}
	if err := r.opts.Temporal.SignalWorkflow(ctx, wf, "", signal, arg); err != nil {
		var gone *serviceerror.NotFound
		if errors.As(err, &gone) {
			return store.OutcomeTargetGone, to, nil
		}
		return "", to, fmt.Errorf("signalling %s: %w", wf, err)
	}
	return store.OutcomeSignalled, to, nil
}
