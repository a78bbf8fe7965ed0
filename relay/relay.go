package relay

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/store"
)

// The relay is in five files, one idea each: this one (its options and
// its run), lane.go (each lane's loop and the size of its claims),
// coalesce.go (lead.created held back per site), dispatch.go (one job
// taken to its target by the route table of routes.go) and retry.go (a
// failed dispatch's backoff and dead letters).

// Store is the part of the store the relay uses.
type Store interface {
	ClaimEvents(ctx context.Context, lane store.Lane, limit int, lease time.Duration) ([]store.InboxEvent, error)
	RecordDispatches(ctx context.Context, ds []store.Dispatch) error
	SiteWorkflow(ctx context.Context, siteID string) (string, error)
	RotationFor(ctx context.Context, endpointID string) (string, error)
	PurgeInbox(ctx context.Context, cutoff time.Time) (int, error)
	InboxBacklog(ctx context.Context) (store.InboxBacklog, error)
}

var _ Store = (*store.Store)(nil)

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

// Options configure a Relay. Store and Temporal are required; every
// other field has a default when zero.
type Options struct {
	Store     Store
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
	// LeadShards is how many lead event shards (LeadEvents workflows)
	// lead.created goes to, grouped by its site's shard
	// (workflows.LeadShardKey); 0 signals each site's LeadSync, as before
	// shards. LeadCoalesce then holds back a shard's events, not a
	// site's.
	LeadShards int
	Now        func() time.Time
}

// withDefaults is o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Batch == 0 {
		o.Batch = 100
	}
	if o.BulkBatch == 0 {
		o.BulkBatch = 500
	}
	if o.Parallel == 0 {
		o.Parallel = 16
	}
	if o.Pipelines <= 0 {
		o.Pipelines = 1
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.Idle == 0 {
		o.Idle = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Retention == 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	if o.DispatchTimeout == 0 {
		o.DispatchTimeout = 10 * time.Second
	}
	o.DispatchTimeout = min(o.DispatchTimeout, o.Lease/3)
	if o.LeadCoalesce == 0 {
		o.LeadCoalesce = time.Second
	}
	// A held event must go out while its lease still hides it from
	// other replicas, early enough in it to be dispatched.
	o.LeadCoalesce = min(o.LeadCoalesce, o.Lease/4)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return o
}

// Relay takes undispatched inbox events and signals the workflows they
// concern, each with its event id so that workflows deduplicate again. It
// is safe to run in several replicas: events are leased when claimed.
// Which workflow an event goes to, with which signal, is its row of the
// route table (Routes).
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
	opts     Options
	coalesce coalescer
	wake     [2]chan struct{} // by lane
	slots    [2]chan struct{} // by lane: Parallel signals in flight
	claim    [2]atomic.Int64  // by lane: how many events the next claim takes
	// burst counts, by lane, the claims since the lane was last found
	// drained (rampDoublings), while Run works it.
	burst [2]atomic.Int64
}

// New returns a relay configured by o.
func New(o Options) *Relay {
	r := &Relay{opts: o.withDefaults()}
	r.coalesce.signaled, r.coalesce.held, r.coalesce.due = map[string]time.Time{}, map[string]*job{}, map[string]time.Time{}
	for i := range r.wake {
		r.wake[i] = make(chan struct{}, r.opts.Pipelines)
		r.slots[i] = make(chan struct{}, r.opts.Parallel)
		r.burst[i].Store(rampDoublings) // no ramp outside Run
	}
	return r
}

// Wake tells the relay that a record was added to lane; it never blocks.
func (r *Relay) Wake(lane store.Lane) {
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

func laneName(l store.Lane) string {
	if l == store.LanePriority {
		return "priority"
	}
	return "bulk"
}

// Run dispatches both lanes until ctx is done, purges old events hourly
// and keeps the gauges current.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, lane := range []store.Lane{store.LanePriority, store.LaneBulk} {
		for range r.opts.Pipelines {
			wg.Go(func() { r.loop(ctx, lane) })
		}
	}
	lastPurge := time.Time{}
	t := time.NewTicker(r.opts.Idle)
	defer t.Stop()
	for ctx.Err() == nil {
		if r.opts.Now().Sub(lastPurge) > time.Hour {
			lastPurge = r.opts.Now()
			if purged, err := r.opts.Store.PurgeInbox(ctx, r.opts.Now().Add(-r.opts.Retention)); err == nil && purged > 0 {
				r.opts.Logger.Info("relay: purged old inbox events", "count", purged)
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

func (r *Relay) updateGauges(ctx context.Context) {
	st, err := r.opts.Store.InboxBacklog(ctx)
	if err != nil {
		return
	}
	var lag time.Duration
	if !st.OldestPending.IsZero() {
		lag = r.opts.Now().Sub(st.OldestPending)
	}
	r.opts.Metrics.inbox(ctx, st.Undispatched, lag)
	r.opts.Metrics.deadLetters(ctx, st.Dead)
}
