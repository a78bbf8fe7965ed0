package webhookingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	ClaimEvents(ctx context.Context, lane store.Lane, limit int, lease time.Duration) ([]store.InboxEvent, error)
	RecordDispatches(ctx context.Context, ds []store.Dispatch) error
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

// DefaultMaxAttempts is how many dispatch attempts in a row may fail before
// an event becomes a dead letter. With the backoff doubling from 1 s to
// its 5-minute cap by the tenth attempt, 20 attempts span about an hour:
// long enough to ride out a Temporal restart or a short outage (which the
// relay's lag reports long before), short enough that an event no retry
// will help leaves the queue, and is seen, within the hour.
const DefaultMaxAttempts = 20

// Relay takes undispatched inbox events and signals the workflows they
// concern, each with its event id so that workflows deduplicate again. It
// is safe to run in several replicas: events are leased when claimed.
//
// It works two lanes of the inbox on their own: the priority lane (events
// a workflow waits on, and endpoint verifications) is never queued behind
// the bulk lane (lead.created and events nothing waits on). In the bulk
// lane, the lead.created events of one site claimed together wake its lead
// sync with one signal that carries all their ids, and those claimed within
// LeadCoalesce of the site's last signal are held back and go together in
// the next one: a steady trickle costs a lead sync one signal per interval,
// not one per event.
//
// Each attempt is recorded in the inbox's history with the workflow (and
// run) it reached or tried. An event whose dispatch fails MaxAttempts times
// in a row becomes a dead letter: no longer claimed, kept by the purge, and
// queued again only by a replay (siteops events replay).
type Relay struct {
	Store     RelayStore
	Temporal  Signaler
	TaskQueue string
	Logger    *slog.Logger
	// Metrics records the relay's metrics; nil for metrics of its own (on
	// a meter provider and registry nobody serves).
	Metrics *Metrics

	// Batch is how many priority events one claim takes (100).
	Batch int
	// BulkBatch is how many bulk events one claim takes (500).
	BulkBatch int
	// Parallel is how many signals are in flight at once per lane (16).
	Parallel int
	// Pipelines is how many claimers work each lane (1). They share the
	// lane's Parallel slots, so while one marks its batch done and claims
	// the next, another keeps the signals flowing. More than one pays on
	// PostgreSQL (claims never block each other); on SQLite, one writer,
	// they queue for its one connection with the other lane's claims: two
	// there left the slots of the bulk lane fuller (BenchmarkRelayDispatch)
	// but made a knowledge.ready behind 5,000 lead.created wait more than
	// 10 s for the connection (TestWaitedForEventsPassBulkOnes).
	Pipelines int
	// Lease is how long a claimed event is hidden from other replicas (30 s).
	// A relay starts dispatching a claimed event only in the first half of
	// its lease, and a dispatch lasts at most a third of it, so that every
	// event it dispatches is recorded before another replica may claim it
	// again. Events it could not start in time stay undispatched until
	// their lease runs out, and the relay claims fewer at once.
	Lease time.Duration
	// Idle is how long to wait for new events when a lane is empty (1 s);
	// Wake cuts it short.
	Idle time.Duration
	// MaxBackoff caps the delay before a failed event is tried again (5 m).
	MaxBackoff time.Duration
	// MaxAttempts is how many failed attempts in a row make an event a
	// dead letter (DefaultMaxAttempts).
	MaxAttempts int
	// Retention is how long dispatched events are kept (30 days).
	Retention time.Duration
	// DispatchTimeout bounds one dispatch (10 s; at most a third of the
	// Lease).
	DispatchTimeout time.Duration
	// LeadCoalesce is how long after signalling a site's lead sync the
	// relay holds back further lead.created for that site (1 s; at most
	// a quarter of the Lease; negative for never). Held events stay claimed and
	// undispatched in the inbox, so a relay that dies holding them loses
	// nothing: their lease runs out and they are claimed again.
	LeadCoalesce time.Duration
	Now          func() time.Time

	coalesce coalescer
	wake     [2]chan struct{} // by lane
	slots    [2]chan struct{} // by lane: Parallel signals in flight
	claim    [2]atomic.Int64  // by lane: how many events the next claim takes
	// burst counts, by lane, the claims since the lane was last found
	// drained (rampDoublings), while Run works it.
	burst    [2]atomic.Int64
	initOnce sync.Once
}

func (r *Relay) init() {
	r.initOnce.Do(func() {
		if r.Batch == 0 {
			r.Batch = 100
		}
		if r.BulkBatch == 0 {
			r.BulkBatch = 500
		}
		if r.Parallel == 0 {
			r.Parallel = 16
		}
		if r.Pipelines <= 0 {
			r.Pipelines = 1
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
		if r.MaxAttempts <= 0 {
			r.MaxAttempts = DefaultMaxAttempts
		}
		if r.Retention == 0 {
			r.Retention = 30 * 24 * time.Hour
		}
		if r.DispatchTimeout == 0 {
			r.DispatchTimeout = 10 * time.Second
		}
		r.DispatchTimeout = min(r.DispatchTimeout, r.Lease/3)
		if r.LeadCoalesce == 0 {
			r.LeadCoalesce = time.Second
		}
		// A held event must go out while its lease still hides it from
		// other replicas, early enough in it to be dispatched.
		r.LeadCoalesce = min(r.LeadCoalesce, r.Lease/4)
		if r.Now == nil {
			r.Now = time.Now
		}
		if r.Logger == nil {
			r.Logger = slog.New(slog.DiscardHandler)
		}
		if r.Metrics == nil {
			r.Metrics = NewMetrics(prometheus.NewRegistry())
		}
		for i := range r.wake {
			r.wake[i] = make(chan struct{}, r.Pipelines)
			r.slots[i] = make(chan struct{}, r.Parallel)
			r.burst[i].Store(rampDoublings) // no ramp outside Run
		}
	})
}

// Wake tells the relay that a record was added to lane; it never blocks.
func (r *Relay) Wake(lane store.Lane) {
	r.init()
	select {
	case r.wake[laneIndex(lane)] <- struct{}{}:
	default:
	}
}

func laneIndex(l store.Lane) int {
	if l == store.LanePriority {
		return 0
	}
	return 1
}

// Run dispatches both lanes until ctx is done, purges old events hourly
// and keeps the gauges current.
func (r *Relay) Run(ctx context.Context) error {
	r.init()
	var wg sync.WaitGroup
	for _, lane := range []store.Lane{store.LanePriority, store.LaneBulk} {
		for range r.Pipelines {
			wg.Go(func() { r.loop(ctx, lane) })
		}
	}
	lastPurge := time.Time{}
	t := time.NewTicker(r.Idle)
	defer t.Stop()
	for ctx.Err() == nil {
		if r.Now().Sub(lastPurge) > time.Hour {
			lastPurge = r.Now()
			if purged, err := r.Store.PurgeInbox(ctx, r.Now().Add(-r.Retention)); err == nil && purged > 0 {
				r.Logger.Info("relay: purged old inbox events", "count", purged)
			}
		}
		r.updateGauges(ctx)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	wg.Wait()
	for i := range r.burst {
		r.burst[i].Store(rampDoublings)
	}
	return nil
}

// loop dispatches one lane until ctx is done.
func (r *Relay) loop(ctx context.Context, lane store.Lane) {
	r.burst[laneIndex(lane)].Store(0)
	for ctx.Err() == nil {
		want := r.claimLimit(lane)
		n, err := r.DispatchOnce(ctx, lane)
		if err != nil && ctx.Err() == nil {
			r.Logger.Error("relay: claiming events failed; retrying", "lane", laneName(lane), "error", err)
		}
		if n >= want {
			continue // more may be waiting
		}
		// The lane is drained: the next burst's claims ramp up again.
		r.burst[laneIndex(lane)].Store(0)
		wait := r.Idle
		if lane == store.LaneBulk {
			// Held lead.created go when their interval is up, with or
			// without new events to claim.
			if due, ok := r.coalesce.nextDue(); ok {
				wait = min(wait, max(due.Sub(r.Now()), 0))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-r.wake[laneIndex(lane)]:
		case <-t.C:
		}
		t.Stop()
	}
}

func (r *Relay) batch(lane store.Lane) int {
	if lane == store.LanePriority {
		return r.Batch
	}
	return r.BulkBatch
}

// claimSize is how many events the next claim of lane takes: the lane's
// batch, or fewer after claims the relay could not dispatch within half
// their lease.
func (r *Relay) claimSize(lane store.Lane) int {
	if n := int(r.claim[laneIndex(lane)].Load()); n > 0 {
		return min(n, r.batch(lane))
	}
	return r.batch(lane)
}

// rampDoublings bounds the ramp of a burst's claims. While Run works a
// lane, the first claim after the lane was found drained takes at most
// twice Parallel events, and each claim after it at most twice as many as
// the one before, up to claimSize. A claim of a whole bulk batch (500)
// cost PostgreSQL 20–40 ms on this machine, and its events' JSON more:
// the burst's first signal waited 160–250 ms for it, 2–3 % of a
// 2,500-event run of BenchmarkRelayDispatch (issue 22 item 5), where a claim
// of 32 lets the signals start at once and the claims reach a whole batch
// within four more.
const rampDoublings = 8

// claimLimit is how many events the next claim of lane takes: claimSize,
// or less while a burst ramps up.
func (r *Relay) claimLimit(lane store.Lane) int {
	size := r.claimSize(lane)
	if k := r.burst[laneIndex(lane)].Load(); k < rampDoublings {
		size = min(size, 2*r.Parallel<<k)
	}
	return size
}

// adjustClaim sets the next claim's size of lane after a batch: down to
// what was dispatched in time when some events were not (never below
// Parallel), and up by a quarter, to at most the batch, when the whole
// batch was dispatched within a quarter of the lease.
func (r *Relay) adjustClaim(lane store.Lane, dispatched, late int, took time.Duration) {
	size := r.claimSize(lane)
	switch {
	case late > 0:
		size = max(min(dispatched, size/2), min(r.Parallel, r.batch(lane)))
	case took < r.Lease/4:
		size = min(size+size/4+1, r.batch(lane))
	}
	r.claim[laneIndex(lane)].Store(int64(size))
}

func laneName(l store.Lane) string {
	if l == store.LanePriority {
		return "priority"
	}
	return "bulk"
}

func (r *Relay) updateGauges(ctx context.Context) {
	st, err := r.Store.InboxStatus(ctx)
	if err != nil {
		return
	}
	var lag time.Duration
	if !st.OldestPending.IsZero() {
		lag = r.Now().Sub(st.OldestPending)
	}
	r.Metrics.inbox(ctx, st.Undispatched, lag)
	r.Metrics.deadLetters(ctx, st.Dead)
}

// job is one dispatch: a single event, or the lead.created events of one
// site, which one signal carries.
type job struct {
	evs  []store.InboxEvent
	site string // for a lead.created group
	// startBy is the latest time the job may start: half-way through the
	// lease of its earliest claimed event.
	startBy time.Time
}

// jobs groups claimed events: the lead.created events of a site together,
// every other event alone, in the order claimed; each must start by
// startBy.
func jobs(evs []store.InboxEvent, startBy time.Time) []*job {
	var out []*job
	bySite := map[string]*job{}
	for _, ev := range evs {
		if ev.Kind == store.KindWebhook && ev.EventType == string(webhook.LeadCreated) {
			if d, ok := readData(ev); ok && d.SiteID != "" {
				if j := bySite[d.SiteID]; j != nil {
					j.evs = append(j.evs, ev)
					continue
				}
				j := &job{evs: []store.InboxEvent{ev}, site: d.SiteID, startBy: startBy}
				bySite[d.SiteID] = j
				out = append(out, j)
				continue
			}
		}
		out = append(out, &job{evs: []store.InboxEvent{ev}, startBy: startBy})
	}
	return out
}

// DispatchOnce claims one batch of lane and dispatches it, then records
// what became of every event (marks and history) in one transaction; it
// returns how many events it claimed. In the bulk lane it holds back the
// lead.created of sites signalled within LeadCoalesce, and dispatches
// those held before whose interval is up.
func (r *Relay) DispatchOnce(ctx context.Context, lane store.Lane) (int, error) {
	r.init()
	claimed := r.Now()
	evs, err := r.Store.ClaimEvents(ctx, lane, r.claimLimit(lane), r.Lease)
	if err != nil {
		return 0, err
	}
	if b := &r.burst[laneIndex(lane)]; b.Load() < rampDoublings {
		b.Add(1)
	}
	js := jobs(evs, claimed.Add(r.Lease/2))
	if lane == store.LaneBulk && r.LeadCoalesce > 0 {
		js = r.coalesce.hold(js, r.Now(), r.LeadCoalesce, r.BulkBatch)
	}
	if len(js) == 0 {
		return len(evs), nil
	}
	sem := r.slots[laneIndex(lane)]
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done []store.Dispatch
	)
	typ := map[string]string{}
	for _, j := range js {
		for _, ev := range j.evs {
			typ[ev.EventID] = typeLabel(ev)
		}
	}
	// At most Parallel goroutines per batch, each dispatching job after
	// job: a goroutine per job would grow a new stack through the gRPC
	// call for every signal, which cost the relay about 40 µs of CPU per
	// event (BenchmarkRelayDispatch's profile). A job takes one of the
	// lane's slots, shared with the lane's other pipelines, from when it
	// is handed out until it is dispatched.
	//
	// A job that could not start by its startBy is left undispatched: its
	// events may be claimed again once their lease runs out, and had it
	// gone out now, it could have been recorded only after that.
	next := make(chan *job)
	var late atomic.Int64
	for range min(r.Parallel, len(js)) {
		wg.Go(func() {
			for j := range next {
				if r.Now().After(j.startBy) {
					late.Add(int64(len(j.evs)))
					<-sem
					continue
				}
				ds := r.handle(ctx, j)
				<-sem
				mu.Lock()
				done = append(done, ds...)
				mu.Unlock()
			}
		})
	}
	for _, j := range js {
		sem <- struct{}{}
		next <- j
	}
	close(next)
	wg.Wait()
	r.adjustClaim(lane, len(done), int(late.Load()), r.Now().Sub(claimed))
	if n := late.Load(); n > 0 {
		r.Logger.Warn("relay: events not dispatched within half their lease; they are claimed again when it runs out",
			"lane", laneName(lane), "count", n, "next_claim", r.claimSize(lane))
	}
	// One transaction marks the batch and records every attempt.
	if err := r.Store.RecordDispatches(ctx, done); err != nil {
		// The leases run out and the events are dispatched again; the
		// workflows deduplicate by event id.
		return len(evs), err
	}
	r.Metrics.signalDelays(ctx, lane, js, done, r.Now())
	for _, d := range done {
		switch {
		case d.Outcome != "":
			r.Metrics.dispatch(ctx, typ[d.EventID], d.Outcome)
		case d.Dead:
			r.Metrics.deadLettered(ctx, typ[d.EventID])
		default:
			r.Metrics.retry(ctx)
		}
	}
	return len(evs), nil
}

// coalescer holds back the lead.created of sites whose lead sync was
// signalled within the interval. Its memory is bounded: a site is
// remembered only for one interval after its last signal, and it holds
// fewer than a batch of events in all: at a batch it releases held events
// early, rather than claim batch after batch only to hold them.
type coalescer struct {
	mu       sync.Mutex
	signaled map[string]time.Time // site → its last signal, for one interval
	held     map[string]*job      // site → events held back
	due      map[string]time.Time // site → when its held events go
	count    int                  // events held
}

// hold takes the jobs of a claim and returns those to dispatch now: every
// job but the lead.created of a site signalled within interval, which are
// held (with any held before) until its interval is up; and the held jobs
// that are due, or that must go to hold fewer than limit events. It counts
// the lead syncs it returns as signalled now.
func (c *coalescer) hold(js []*job, now time.Time, interval time.Duration, limit int) []*job {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.signaled == nil {
		c.signaled, c.held, c.due = map[string]time.Time{}, map[string]*job{}, map[string]time.Time{}
	}
	for site, at := range c.signaled {
		if now.Sub(at) >= interval && c.held[site] == nil {
			delete(c.signaled, site)
		}
	}
	var out []*job
	for _, j := range js {
		if j.site == "" {
			out = append(out, j)
			continue
		}
		h := c.held[j.site]
		if h == nil {
			at, ok := c.signaled[j.site]
			if !ok || now.Sub(at) >= interval {
				c.signaled[j.site] = now
				out = append(out, j)
				continue
			}
			h = &job{site: j.site, startBy: j.startBy}
			c.held[j.site], c.due[j.site] = h, at.Add(interval)
		}
		c.count += h.add(j.evs)
		if j.startBy.Before(h.startBy) {
			h.startBy = j.startBy
		}
	}
	for site, h := range c.held {
		if now.Before(c.due[site]) && c.count < limit {
			continue
		}
		delete(c.held, site)
		delete(c.due, site)
		c.count -= len(h.evs)
		c.signaled[site] = now
		out = append(out, h)
	}
	return out
}

// add appends the events not already in j and says how many it added: a
// held event whose lease ran out (a slow relay) may be claimed again.
func (j *job) add(evs []store.InboxEvent) int {
	n := 0
	for _, ev := range evs {
		if !slices.ContainsFunc(j.evs, func(o store.InboxEvent) bool { return o.EventID == ev.EventID }) {
			j.evs = append(j.evs, ev)
			n++
		}
	}
	return n
}

// nextDue is when the earliest held events go; false when none are held.
func (c *coalescer) nextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for _, at := range c.due {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// typeLabel is the metrics label of a record: its event type, or its kind
// when siteops made it.
func typeLabel(ev store.InboxEvent) string {
	if ev.Kind != "" && ev.Kind != store.KindWebhook {
		return ev.Kind
	}
	return ev.EventType
}

// target is the workflow a dispatch reached or tried, and the run when a
// SignalWithStart said which.
type target struct{ workflow, run string }

// handle dispatches one job and says what became of each of its events:
// an outcome, or a failure to try again after a backoff (or, after
// MaxAttempts failures in a row, never again: a dead letter).
func (r *Relay) handle(ctx context.Context, j *job) []store.Dispatch {
	first := j.evs[0]
	// A Temporal that is down must not hold the batch: each dispatch gets
	// a deadline, and a failure is retried later with backoff.
	dctx, cancel := context.WithTimeout(ctx, r.DispatchTimeout)
	dctx, span := dispatchSpan(dctx, j.evs)
	var outcome string
	var to target
	var err error
	if j.site != "" {
		outcome, to, err = r.wakeLeadSync(dctx, j.site, j.evs)
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
	outOfTime := errors.Is(dctx.Err(), context.DeadlineExceeded)
	cancel()
	ds := make([]store.Dispatch, len(j.evs))
	for i, ev := range j.evs {
		ds[i] = store.Dispatch{EventID: ev.EventID, Outcome: outcome, WorkflowID: to.workflow, RunID: to.run}
	}
	if err == nil {
		r.Logger.Debug("relay: dispatched", "event_id", first.EventID, "event_type", typeLabel(first), "events", len(j.evs), "outcome", outcome)
		return ds
	}
	// The last error an event keeps (siteops events show) names the cause:
	// Temporal that did not answer within the dispatch's time, or that
	// answered Unavailable (down, restarting, unreachable).
	why := err.Error()
	var (
		noAnswer    *serviceerror.DeadlineExceeded
		unavailable *serviceerror.Unavailable
	)
	switch {
	case errors.As(err, &noAnswer) && outOfTime:
		why = fmt.Sprintf("%s: Temporal did not answer within %s (the relay's dispatch timeout): it is down, unreachable or overloaded (a history service that is down looks like this); the relay tries again", why, r.DispatchTimeout)
	case errors.As(err, &noAnswer):
		why += ": Temporal gave no answer in time (it is overloaded or its history service is down); the relay tries again"
	case errors.As(err, &unavailable):
		why += ": Temporal is unavailable (down, restarting or unreachable); the relay tries again"
	}
	dead := 0
	for i, ev := range j.evs {
		ds[i].Outcome, ds[i].Error = "", why
		if ev.Failures+1 >= r.MaxAttempts {
			ds[i].Dead = true
			dead++
			continue
		}
		delay := min(time.Duration(1<<min(ev.Failures, 20))*time.Second, r.MaxBackoff)
		ds[i].Next = r.Now().Add(delay)
	}
	if dead > 0 {
		r.Logger.Error("relay: dispatch failed too often; dead letters kept for `siteops events replay`", "event_id", first.EventID, "event_type", typeLabel(first),
			"events", len(j.evs), "dead", dead, "attempts_in_a_row", r.MaxAttempts, "error", err)
	} else {
		r.Logger.Warn("relay: dispatch failed; will retry", "event_id", first.EventID, "event_type", typeLabel(first), "events", len(j.evs), "attempt", first.Attempts+1, "error", err)
	}
	return ds
}

// wakeLeadSync signals (starting it if needed) the site's lead sync with
// every event id of the group.
func (r *Relay) wakeLeadSync(ctx context.Context, siteID string, evs []store.InboxEvent) (string, target, error) {
	sig := workflows.LeadsCreatedSignal{EventIDs: make([]string, len(evs))}
	for i, ev := range evs {
		sig.EventIDs[i] = ev.EventID
	}
	id := workflows.LeadSyncID(siteID)
	run, err := r.Temporal.SignalWithStartWorkflow(ctx, id, workflows.SignalLeadsCreated, sig,
		client.StartWorkflowOptions{ID: id, TaskQueue: r.TaskQueue, WorkflowIDReusePolicy: workflows.LeadSyncKind.Policy.Reuse},
		workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: siteID})
	if err != nil {
		return "", target{workflow: id}, fmt.Errorf("signal-with-start %s: %w", id, err)
	}
	to := target{workflow: id}
	if run != nil {
		to.run = run.GetRunID()
	}
	return store.OutcomeSignalled, to, nil
}

// siteData is what the relay reads of an event's data.
type siteData struct {
	SiteID      string `json:"site_id"`
	LeadID      string `json:"lead_id"`
	KnowledgeID string `json:"knowledge_id"`
	Status      string `json:"status"`
}

// readData reads an event's data; false when its body is not an envelope.
// It calls the envelope's own decoder, which checks the body's syntax as
// it decodes: through json.Unmarshal the body would be scanned once more
// before.
func readData(ev store.InboxEvent) (siteData, bool) {
	var env webhook.Envelope
	if err := env.UnmarshalJSON(ev.Body); err != nil {
		return siteData{}, false
	}
	var d siteData
	_ = json.Unmarshal(env.Data, &d)
	return d, true
}

// dispatch routes one event. A nil error means the event is handled and
// outcome says how; an error means try again later. The target is the
// workflow it reached or tried, when there was one.
func (r *Relay) dispatch(ctx context.Context, ev store.InboxEvent) (string, target, error) {
	switch ev.Kind {
	case store.KindEndpointVerified:
		return r.endpointVerified(ctx, ev)
	case store.KindWebhook, "":
	default:
		return store.OutcomeIgnored, target{}, nil
	}
	d, ok := readData(ev)
	if !ok {
		return store.OutcomeMalformed, target{}, nil
	}
	switch webhook.EventType(ev.EventType) {
	case webhook.LeadCreated:
		if d.SiteID == "" {
			return store.OutcomeMalformed, target{}, nil
		}
		return r.wakeLeadSync(ctx, d.SiteID, []store.InboxEvent{ev})
	case webhook.KnowledgeReady:
		return r.signalSite(ctx, d.SiteID, workflows.SignalKnowledgeReady, workflows.KnowledgeReadySignal{EventID: ev.EventID, KnowledgeID: d.KnowledgeID})
	case webhook.SitePublished, webhook.SiteUnpublished:
		return r.signalSite(ctx, d.SiteID, workflows.SignalSiteStatus, workflows.SiteStatusSignal{EventID: ev.EventID, Type: ev.EventType, Status: d.Status})
	}
	// conversation.*, broadcast.sent, the retired domain.activated and
	// types added later: recorded, nothing waits for them.
	return store.OutcomeIgnored, target{}, nil
}

// endpointVerified tells a rotation workflow that its new endpoint got a
// verified delivery.
func (r *Relay) endpointVerified(ctx context.Context, ev store.InboxEvent) (string, target, error) {
	wf, err := r.Store.RotationFor(ctx, ev.EndpointID)
	if errors.Is(err, store.ErrNotFound) {
		return store.OutcomeNoTarget, target{}, nil
	}
	if err != nil {
		return "", target{}, err
	}
	sig := workflows.VerifiedDeliverySignal{EventID: ev.SubjectEventID, EndpointID: ev.EndpointID}
	return r.signal(ctx, wf, workflows.SignalVerifiedDelivery, sig)
}

// signalSite signals the onboarding workflow that owns a site.
func (r *Relay) signalSite(ctx context.Context, siteID, signal string, arg any) (string, target, error) {
	if siteID == "" {
		return store.OutcomeMalformed, target{}, nil
	}
	wf, err := r.Store.SiteWorkflow(ctx, siteID)
	if errors.Is(err, store.ErrNotFound) {
		return store.OutcomeNoTarget, target{}, nil
	}
	if err != nil {
		return "", target{}, err
	}
	return r.signal(ctx, wf, signal, arg)
}

// signal signals the running workflow wf; an ended one is target-gone.
func (r *Relay) signal(ctx context.Context, wf, signal string, arg any) (string, target, error) {
	to := target{workflow: wf}
	if err := r.Temporal.SignalWorkflow(ctx, wf, "", signal, arg); err != nil {
		if isNotFound(err) {
			return store.OutcomeTargetGone, to, nil
		}
		return "", to, fmt.Errorf("signalling %s: %w", wf, err)
	}
	return store.OutcomeSignalled, to, nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}
