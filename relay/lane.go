package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// loop dispatches one lane until ctx is done.
func (r *Relay) loop(ctx context.Context, lane store.Lane) {
	r.burst[laneIndex(lane)].Store(0)
	for ctx.Err() == nil {
		want := r.claimLimit(lane)
		n, err := r.DispatchOnce(ctx, lane)
		if err != nil && ctx.Err() == nil {
			r.opts.Logger.Error("relay: claiming events failed; retrying", "lane", laneName(lane), "error", err)
		}
		if n >= want {
			continue // more may be waiting
		}
		// The lane is drained: the next burst's claims ramp up again.
		r.burst[laneIndex(lane)].Store(0)
		wait := r.opts.Idle
		if lane == store.LaneBulk {
			// Held lead.created go when their interval is up, with or
			// without new events to claim.
			if due, ok := r.coalesce.nextDue(); ok {
				wait = min(wait, max(due.Sub(r.opts.Now()), 0))
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
		return r.opts.Batch
	}
	return r.opts.BulkBatch
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
		size = min(size, 2*r.opts.Parallel<<k)
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
		size = max(min(dispatched, size/2), min(r.opts.Parallel, r.batch(lane)))
	case took < r.opts.Lease/4:
		size = min(size+size/4+1, r.batch(lane))
	}
	r.claim[laneIndex(lane)].Store(int64(size))
}

// job is one dispatch: a single event, or the events of one site (or,
// with lead shards, of one shard's sites) that one signal carries (a Batch
// route's).
type job struct {
	evs []store.InboxEvent
	// For a group: its route, the key of its target (the site, or the
	// shard), and key, the route's type and that target key, by which the
	// coalescer holds it back.
	route Route
	site  string
	key   string
	// startBy is the latest time the job may start: half-way through the
	// lease of its earliest claimed event.
	startBy time.Time
}

// jobs groups claimed events: the events of a Batch route for one site
// together (with shards > 0, lead.created for the sites of one shard, to
// its LeadEvents), every other event alone, in the order claimed; each
// must start by startBy.
func jobs(evs []store.InboxEvent, startBy time.Time, shards int) []*job {
	var out []*job
	byKey := map[string]*job{}
	for _, ev := range evs {
		if rt, ok := RouteOf(ev); ok && rt.Batch {
			if d, ok := readData(ev); ok && d.SiteID != "" {
				target := d.SiteID
				if shards > 0 && rt.Type == LeadEventsRoute.Type {
					rt, target = LeadEventsRoute, workflows.LeadShardKey(d.SiteID, shards)
				}
				key := rt.Target.Prefix + target
				if j := byKey[key]; j != nil {
					j.evs = append(j.evs, ev)
					continue
				}
				j := &job{evs: []store.InboxEvent{ev}, route: rt, site: target, key: key, startBy: startBy}
				byKey[key] = j
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
// groups of sites signalled within LeadCoalesce, and dispatches those held
// before whose interval is up.
func (r *Relay) DispatchOnce(ctx context.Context, lane store.Lane) (int, error) {
	claimed := r.opts.Now()
	evs, err := r.opts.Store.ClaimEvents(ctx, lane, r.claimLimit(lane), r.opts.Lease)
	if err != nil {
		return 0, err
	}
	if b := &r.burst[laneIndex(lane)]; b.Load() < rampDoublings {
		b.Add(1)
	}
	js := jobs(evs, claimed.Add(r.opts.Lease/2), r.opts.LeadShards)
	if lane == store.LaneBulk && r.opts.LeadCoalesce > 0 {
		js = r.coalesce.hold(js, r.opts.Now(), r.opts.LeadCoalesce, r.opts.BulkBatch)
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
			typ[ev.EventID] = TypeLabel(ev)
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
	for range min(r.opts.Parallel, len(js)) {
		wg.Go(func() {
			for j := range next {
				if r.opts.Now().After(j.startBy) {
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
	r.adjustClaim(lane, len(done), int(late.Load()), r.opts.Now().Sub(claimed))
	if n := late.Load(); n > 0 {
		r.opts.Logger.Warn("relay: events not dispatched within half their lease; they are claimed again when it runs out",
			"lane", laneName(lane), "count", n, "next_claim", r.claimSize(lane))
	}
	// One transaction marks the batch and records every attempt.
	if err := r.opts.Store.RecordDispatches(ctx, done); err != nil {
		// The leases run out and the events are dispatched again; the
		// workflows deduplicate by event id.
		return len(evs), err
	}
	r.opts.Metrics.signalDelays(ctx, lane, js, done, r.opts.Now())
	for _, d := range done {
		switch {
		case d.Outcome != "":
			r.opts.Metrics.dispatch(ctx, typ[d.EventID], d.Outcome)
		case d.Dead:
			r.opts.Metrics.deadLettered(ctx, typ[d.EventID])
		default:
			r.opts.Metrics.retry(ctx)
		}
	}
	return len(evs), nil
}
