package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry/telemetrytest"
	"github.com/siteops/siteops/workflows"
)

// now is the relay fixture's clock at the start.
var now = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// fakeTemporal answers the relay's signals: with fail set, every call
// fails as an unreachable server's would; gone names workflows that ended.
// A lead sync runs once a SignalWithStart has started it (notRunning).
type fakeTemporal struct {
	mu      sync.Mutex
	fail    error
	gone    map[string]bool
	started map[string]bool
	signals map[string]int // by workflow ID
	// batches holds the event ids of each lead-sync signal, by workflow ID;
	// shardSignals each lead event shard's signals.
	batches      map[string][][]string
	shardSignals map[string][]workflows.SiteLeadsSignal
	run          int
	// slow, when set, runs before each SignalWithStart: a slow server.
	slow func()
}

type fakeRun struct {
	client.WorkflowRun
	id string
}

func (r fakeRun) GetRunID() string { return r.id }

// notRunning says whether the fakes hold wf not to run: one that ended
// (gone), and a lead sync that no SignalWithStart has started, the one
// kind of target the relay starts (an onboarding and a rotation are taken
// to run).
func notRunning(wf string, gone, started map[string]bool) bool {
	startable := strings.HasPrefix(wf, workflows.LeadSyncKind.Prefix) || strings.HasPrefix(wf, workflows.LeadEventsKind.Prefix)
	return gone[wf] || startable && !started[wf]
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, wf, _, _ string, arg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if notRunning(wf, f.gone, f.started) {
		return serviceerror.NewNotFound("workflow execution already completed")
	}
	f.signalled(wf, arg)
	return nil
}

// signalled counts a signal to wf, and keeps the events of a lead sync's.
func (f *fakeTemporal) signalled(wf string, arg any) {
	f.signals[wf]++
	if sig, ok := arg.(workflows.LeadsCreatedSignal); ok {
		if f.batches == nil {
			f.batches = map[string][][]string{}
		}
		f.batches[wf] = append(f.batches[wf], sig.EventIDs)
	}
	if sig, ok := arg.(workflows.SiteLeadsSignal); ok {
		if f.shardSignals == nil {
			f.shardSignals = map[string][]workflows.SiteLeadsSignal{}
		}
		f.shardSignals[wf] = append(f.shardSignals[wf], sig)
	}
}

func (f *fakeTemporal) SignalWithStartWorkflow(_ context.Context, wf, _ string, arg any, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	if f.slow != nil {
		f.slow()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	if f.started == nil {
		f.started = map[string]bool{}
	}
	f.started[wf], f.gone[wf] = true, false
	f.signalled(wf, arg)
	f.run++
	return fakeRun{id: fmt.Sprintf("run-%d", f.run)}, nil
}

type relayFixture struct {
	st    *store.Store
	tmp   *fakeTemporal
	relay *Relay
	reg   *prometheus.Registry
	mu    sync.Mutex
	now   time.Time
}

func (f *relayFixture) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *relayFixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func newRelayFixture(t *testing.T, d store.Dialect, maxAttempts int) *relayFixture {
	t.Helper()
	f := &relayFixture{tmp: &fakeTemporal{gone: map[string]bool{}, signals: map[string]int{}}, now: now, reg: prometheus.NewRegistry()}
	f.st = storetest.OpenWith(t, d, store.Options{Clock: f.clock})
	o := f.options()
	o.MaxAttempts = maxAttempts
	f.relay = New(o)
	if got := telemetrytest.Value(t, f.reg, "siteops_relay_dead_letters"); got != 0 {
		t.Errorf("before any dead letter, siteops_relay_dead_letters = %v, want a gauge at 0", got)
	}
	return f
}

// options are the fixture relay's: its store, Temporal and clock, metrics
// on its registry.
func (f *relayFixture) options() Options {
	return Options{Store: f.st, Temporal: f.tmp, TaskQueue: "q", Now: f.clock, Metrics: NewMetrics(f.reg)}
}

func (f *relayFixture) record(t *testing.T, id, typ, data string) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":%s}`, id, typ, data)
	if _, err := f.st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: typ, Lane: LaneFor(typ), EndpointID: "env", ReceivedAt: f.clock(), Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// dispatchAll runs one claim of each lane.
func (f *relayFixture) dispatchAll(t *testing.T) int {
	t.Helper()
	n := 0
	for _, lane := range []store.Lane{store.LanePriority, store.LaneBulk} {
		k, err := f.relay.DispatchOnce(t.Context(), lane)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

func eachDialect(t *testing.T, f func(t *testing.T, d store.Dialect)) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) { f(t, d) })
	}
}

// TestRelayRecordsWhereEachEventWent checks the history the relay writes
// with its marks: the workflow (and run) of every event, also of the
// lead.created events one signal carried.
func TestRelayRecordsWhereEachEventWent(t *testing.T) {
	eachDialect(t, func(t *testing.T, d store.Dialect) {
		f := newRelayFixture(t, d, 0)
		ctx := t.Context()
		if err := f.st.SetSiteWorkflow(ctx, "site_2", "onboarding/two"); err != nil {
			t.Fatal(err)
		}
		if err := f.st.SetSiteWorkflow(ctx, "site_3", "onboarding/three"); err != nil {
			t.Fatal(err)
		}
		f.tmp.gone["onboarding/three"] = true
		f.record(t, "evt_l1", "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`)
		f.record(t, "evt_l2", "lead.created", `{"site_id":"site_1","lead_id":"lead_2"}`)
		f.record(t, "evt_k2", "knowledge.ready", `{"site_id":"site_2","knowledge_id":"kn_1"}`)
		f.record(t, "evt_k3", "knowledge.ready", `{"site_id":"site_3","knowledge_id":"kn_1"}`)
		f.record(t, "evt_k9", "knowledge.ready", `{"site_id":"site_9","knowledge_id":"kn_1"}`)
		if n := f.dispatchAll(t); n != 5 {
			t.Fatalf("dispatched %d, want 5", n)
		}
		if n := f.tmp.signals[workflows.LeadSyncID("site_1")]; n != 1 {
			t.Errorf("%d signals to the lead sync, want one carrying both events", n)
		}
		for _, w := range []struct{ id, outcome, wf, run string }{
			{"evt_l1", store.OutcomeSignalled, "lead-sync/site_1", "run-1"},
			{"evt_l2", store.OutcomeSignalled, "lead-sync/site_1", "run-1"},
			{"evt_k2", store.OutcomeSignalled, "onboarding/two", ""},
			{"evt_k3", store.OutcomeTargetGone, "onboarding/three", ""},
			{"evt_k9", store.OutcomeNoTarget, "", ""},
		} {
			ev, err := f.st.Event(ctx, w.id)
			if err != nil {
				t.Fatal(err)
			}
			wf, run := ev.Target()
			if ev.Outcome != w.outcome || wf != w.wf || run != w.run || len(ev.History) != 1 || ev.History[0].Outcome != w.outcome {
				t.Errorf("%s: %s, reached %q %q, history %+v; want %s, %q %q", w.id, ev.Outcome, wf, run, ev.History, w.outcome, w.wf, w.run)
			}
		}
	})
}

// TestDeadLetters fails every dispatch until the bound, then checks that
// the event is a dead letter (counted, never claimed again) and that a
// replay gives it a full set of attempts again.
func TestDeadLetters(t *testing.T) {
	eachDialect(t, func(t *testing.T, d store.Dialect) {
		f := newRelayFixture(t, d, 3)
		ctx := t.Context()
		f.tmp.fail = serviceerror.NewUnavailable("connection refused")
		f.record(t, "evt_d1", "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`)
		f.record(t, "evt_d2", "lead.created", `{"site_id":"site_1","lead_id":"lead_2"}`)
		for attempt := 1; attempt <= 3; attempt++ {
			if n := f.dispatchAll(t); n != 2 {
				t.Fatalf("attempt %d claimed %d events, want 2", attempt, n)
			}
			f.advance(f.relay.opts.MaxBackoff)
		}
		if n := f.dispatchAll(t); n != 0 {
			t.Errorf("a dead letter was claimed again (%d)", n)
		}
		ev, err := f.st.Event(ctx, "evt_d1")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Outcome != store.OutcomeDead || ev.Attempts != 3 || len(ev.History) != 3 || ev.History[2].Outcome != store.OutcomeDead ||
			ev.History[0].Outcome != store.OutcomeFailed || ev.History[0].WorkflowID != "lead-sync/site_1" || ev.LastError == "" {
			t.Errorf("after 3 failures: %+v", ev)
		}
		f.relay.updateGauges(ctx)
		mfs := telemetrytest.Families(t, gather(t, f.reg))
		for _, w := range []struct {
			name, typ string
			labels    []string
			value     float64
		}{
			{"siteops_relay_dead_letters", "gauge", nil, 2},
			{"siteops_relay_dead_lettered_total", "counter", []string{"type", "lead.created"}, 2},
			{"siteops_relay_retries_total", "counter", nil, 4}, // two failures of each before the last
		} {
			if got := telemetrytest.Type(mfs, w.name); got != w.typ {
				t.Errorf("TYPE %s = %q, want %s", w.name, got, w.typ)
			}
			if got := telemetrytest.ValueIn(t, mfs, w.name, w.labels...); got != w.value {
				t.Errorf("%s%q = %v, want %v", w.name, w.labels, got, w.value)
			}
		}
		// Retention keeps dead letters.
		f.advance(60 * 24 * time.Hour)
		if n, err := f.st.PurgeInbox(ctx, f.clock().Add(-30*24*time.Hour)); err != nil || n != 0 {
			t.Errorf("purged %d, %v; dead letters are kept", n, err)
		}

		// Temporal is back; a replay makes them due at once with three
		// attempts ahead again, and the next claim dispatches them.
		f.tmp.fail = nil
		if _, err := f.st.ReplayEvents(ctx, []string{"evt_d1", "evt_d2"}, "alice"); err != nil {
			t.Fatal(err)
		}
		if n := f.dispatchAll(t); n != 2 {
			t.Fatalf("after the replay %d events were claimed, want 2", n)
		}
		ev, _ = f.st.Event(ctx, "evt_d1")
		last := ev.History[len(ev.History)-1]
		if ev.Outcome != store.OutcomeSignalled || last.Attempt != 4 || last.Replay != 1 || ev.History[3].Kind != store.HistoryReplay {
			t.Errorf("after the replay: %+v", ev)
		}
		f.relay.updateGauges(ctx)
		if got := telemetrytest.Value(t, f.reg, "siteops_relay_dead_letters"); got != 0 {
			t.Errorf("siteops_relay_dead_letters after the replay = %v, want 0", got)
		}
	})
}

// TestFailuresBackOffAndDoNotStopOthers checks that a failing event waits
// its backoff while the rest of its batch is marked, all in one write.
func TestFailuresBackOffAndDoNotStopOthers(t *testing.T) {
	f := newRelayFixture(t, store.SQLite, 0)
	ctx := t.Context()
	if err := f.st.SetSiteWorkflow(ctx, "site_2", "onboarding/two"); err != nil {
		t.Fatal(err)
	}
	f.record(t, "evt_ok", "knowledge.ready", `{"site_id":"site_9","knowledge_id":"kn_1"}`)
	f.record(t, "evt_bad", "knowledge.ready", `{"site_id":"site_2","knowledge_id":"kn_1"}`)
	f.tmp.fail = errors.New("deadline exceeded")
	if n := f.dispatchAll(t); n != 2 {
		t.Fatalf("claimed %d", n)
	}
	ok, _ := f.st.Event(ctx, "evt_ok")
	bad, _ := f.st.Event(ctx, "evt_bad")
	if ok.Outcome != store.OutcomeNoTarget || bad.Status() != store.StatusFailing || !bad.NextAttemptAt.Equal(now.Add(time.Second)) {
		t.Errorf("ok %+v\nbad %+v", ok, bad)
	}
	f.advance(time.Second)
	if n := f.dispatchAll(t); n != 1 {
		t.Fatalf("after 1 s %d events were due, want the failed one", n)
	}
	bad, _ = f.st.Event(ctx, "evt_bad")
	if !bad.NextAttemptAt.Equal(f.clock().Add(2*time.Second)) || bad.Failures != 2 {
		t.Errorf("after the second failure: next %s, %d failures; want 2 s later", bad.NextAttemptAt, bad.Failures)
	}
}

// gather is reg's metrics in the text format /metrics serves.
func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestRelayCoalescesLeadCreatedPerSite sends a trickle of lead.created for
// one site: after a signal, the site's events are held back (undispatched
// in the inbox) for LeadCoalesce and then go in one signal, other sites and
// the priority lane are not held, and a relay that dies holding events
// loses none: another claims them when their lease runs out.
func TestRelayCoalescesLeadCreatedPerSite(t *testing.T) {
	eachDialect(t, func(t *testing.T, d store.Dialect) {
		f := newRelayFixture(t, d, 0)
		ctx := t.Context()
		if err := f.st.SetSiteWorkflow(ctx, "site_2", "onboarding/two"); err != nil {
			t.Fatal(err)
		}
		sync1 := workflows.LeadSyncID("site_1")
		lead := func(id, site string) {
			t.Helper()
			f.record(t, id, "lead.created", fmt.Sprintf(`{"site_id":%q,"lead_id":"lead_%s"}`, site, id))
		}
		outcome := func(id string) string {
			t.Helper()
			ev, err := f.st.Event(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return ev.Status()
		}

		lead("evt_1", "site_1")
		f.dispatchAll(t)
		f.advance(200 * time.Millisecond)
		lead("evt_2", "site_1")
		lead("evt_9", "site_9")
		f.record(t, "evt_k", "knowledge.ready", `{"site_id":"site_2","knowledge_id":"kn_1"}`)
		f.dispatchAll(t)
		f.advance(300 * time.Millisecond)
		lead("evt_3", "site_1")
		f.dispatchAll(t)

		if got := f.tmp.batches[sync1]; len(got) != 1 || !slices.Equal(got[0], []string{"evt_1"}) {
			t.Errorf("within the interval, lead-sync/site_1 got signals %v, want one for evt_1", got)
		}
		for _, id := range []string{"evt_2", "evt_3"} {
			if got := outcome(id); got != store.StatusPending {
				t.Errorf("%s is %s while held, want %s in the inbox", id, got, store.StatusPending)
			}
		}
		if got := f.tmp.batches[workflows.LeadSyncID("site_9")]; len(got) != 1 {
			t.Errorf("site_9, not signalled before, got %d signals, want 1 at once", len(got))
		}
		if got := outcome("evt_k"); got != store.OutcomeSignalled {
			t.Errorf("knowledge.ready is %s, want %s at once: the priority lane is never held", got, store.OutcomeSignalled)
		}

		// The interval since the first signal is up: one signal carries
		// both held events, with nothing new to claim.
		f.advance(500 * time.Millisecond)
		if n := f.dispatchAll(t); n != 0 {
			t.Errorf("claimed %d events, want none (the held ones are claimed already)", n)
		}
		if got := f.tmp.batches[sync1]; len(got) != 2 || !slices.Equal(sortedCopy(got[1]), []string{"evt_2", "evt_3"}) {
			t.Fatalf("lead-sync/site_1 got signals %v, want a second one carrying evt_2 and evt_3", got)
		}
		for _, id := range []string{"evt_2", "evt_3"} {
			if got := outcome(id); got != store.OutcomeSignalled {
				t.Errorf("%s is %s after the interval, want %s", id, got, store.OutcomeSignalled)
			}
		}

		// A relay that dies holding an event: a fresh one claims it once
		// its lease has run out.
		lead("evt_4", "site_1")
		f.dispatchAll(t)
		if got := outcome("evt_4"); got != store.StatusPending {
			t.Fatalf("evt_4 is %s, want held", got)
		}
		other := New(Options{Store: f.st, Temporal: f.tmp, TaskQueue: "q", Now: f.clock, Metrics: NewMetrics(prometheus.NewRegistry())})
		f.advance(f.relay.opts.Lease)
		if n, err := other.DispatchOnce(ctx, store.LaneBulk); err != nil || n != 1 {
			t.Fatalf("the other relay claimed %d events (%v), want evt_4", n, err)
		}
		if got := outcome("evt_4"); got != store.OutcomeSignalled {
			t.Errorf("evt_4 is %s after the other relay's claim, want %s", got, store.OutcomeSignalled)
		}

		// Memory is bounded: a site is forgotten an interval after its
		// last signal. (The first relay, still alive here, sends evt_4 a
		// second time first: at least once, as after any lease that ran
		// out.)
		for range 2 {
			f.advance(time.Minute)
			f.dispatchAll(t)
		}
		f.relay.coalesce.mu.Lock()
		remembered, held, count := len(f.relay.coalesce.signaled), len(f.relay.coalesce.held), f.relay.coalesce.count
		f.relay.coalesce.mu.Unlock()
		if remembered != 0 || held != 0 || count != 0 {
			t.Errorf("a minute later the relay remembers %d sites and holds %d groups of %d events, want none", remembered, held, count)
		}
	})
}

// TestRelaySendsLeadCreatedToShards: with lead shards, the lead.created
// events claimed together go in one signal per shard, grouped by site
// within it, starting the shard's workflow; a shard signalled within the
// coalescing interval waits for it, whatever site its events are of.
func TestRelaySendsLeadCreatedToShards(t *testing.T) {
	eachDialect(t, func(t *testing.T, d store.Dialect) {
		f := newRelayFixture(t, d, 0)
		o := f.options()
		o.LeadShards = 2
		f.relay = New(o)
		ctx := t.Context()
		sites := []string{"site_1", "site_2", "site_3", "site_4", "site_5"}
		events := map[string][]string{}
		for i, site := range append(sites, "site_1") {
			id := fmt.Sprintf("evt_%d", i)
			f.record(t, id, "lead.created", fmt.Sprintf(`{"site_id":%q,"lead_id":"lead_%d"}`, site, i))
			events[site] = append(events[site], id)
		}
		f.dispatchAll(t)
		shards := map[string][]string{} // shard workflow → its sites, in order
		for _, site := range sites {
			wf := workflows.LeadEventsKind.ID(workflows.LeadShardKey(site, 2))
			shards[wf] = append(shards[wf], site)
		}
		if len(f.tmp.signals) != len(shards) {
			t.Errorf("signalled %v; want one signal to each of %d shards and nothing else", f.tmp.signals, len(shards))
		}
		for wf, want := range shards {
			got := f.tmp.shardSignals[wf]
			if len(got) != 1 || !f.tmp.started[wf] {
				t.Errorf("%s got %d signals (started %v); want one SignalWithStart", wf, len(got), f.tmp.started[wf])
				continue
			}
			var gotSites []string
			for _, s := range got[0].Sites {
				gotSites = append(gotSites, s.SiteID)
				if !slices.Equal(s.EventIDs, events[s.SiteID]) {
					t.Errorf("%s: site %s carried events %v; want %v", wf, s.SiteID, s.EventIDs, events[s.SiteID])
				}
			}
			if !slices.Equal(gotSites, want) {
				t.Errorf("%s carried sites %v; want %v", wf, gotSites, want)
			}
		}
		for _, ids := range events {
			for _, id := range ids {
				if ev, err := f.st.Event(ctx, id); err != nil || ev.Status() != store.OutcomeSignalled {
					t.Errorf("%s is %v (%v); want %s", id, ev.Status(), err, store.OutcomeSignalled)
				}
			}
		}
		// Another site of a shard just signalled waits for its interval.
		var later string
		for i := 6; later == ""; i++ {
			if s := fmt.Sprintf("site_%d", i); workflows.LeadShardKey(s, 2) == workflows.LeadShardKey("site_1", 2) {
				later = s
			}
		}
		f.record(t, "evt_later", "lead.created", fmt.Sprintf(`{"site_id":%q}`, later))
		f.dispatchAll(t)
		if ev, _ := f.st.Event(ctx, "evt_later"); ev.Status() != store.StatusPending {
			t.Errorf("an event of a shard signalled within the interval is %s; want held", ev.Status())
		}
		f.advance(time.Second)
		f.dispatchAll(t)
		if ev, _ := f.st.Event(ctx, "evt_later"); ev.Status() != store.OutcomeSignalled {
			t.Errorf("after the interval the held event is %s; want %s", ev.Status(), store.OutcomeSignalled)
		}
	})
}

// TestRelayReleasesAFullBatchAtOnce holds back less than a batch of
// events: at a batch they go at once, not when their interval is up, so
// that the relay neither claims without end nor holds without bound.
func TestRelayReleasesAFullBatchAtOnce(t *testing.T) {
	f := newRelayFixture(t, store.SQLite, 0)
	o := f.options()
	o.BulkBatch = 3
	f.relay = New(o)
	for i := range 4 {
		f.record(t, fmt.Sprintf("evt_%d", i), "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`)
	}
	f.dispatchAll(t) // evt_0..2 at once
	f.dispatchAll(t) // evt_3 held
	for i := 4; i < 6; i++ {
		f.record(t, fmt.Sprintf("evt_%d", i), "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`)
	}
	f.dispatchAll(t) // evt_3..5 make a batch: at once
	if got := f.tmp.batches[workflows.LeadSyncID("site_1")]; len(got) != 2 || len(got[1]) != 3 {
		t.Errorf("signals %v, want two of three events each", got)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// TestRelayDispatchesOnlyWithinItsLease makes every signal take 2 s (on
// the relay's clock) with one in flight: of a claim of 20, the relay starts
// only those it can start in the first half of their 30 s lease, leaves
// the rest leased and undispatched, and claims fewer next time. Once the
// lease runs out the rest go out, each event signalled exactly once.
func TestRelayDispatchesOnlyWithinItsLease(t *testing.T) {
	f := newRelayFixture(t, store.SQLite, 0)
	o := f.options()
	o.Parallel, o.LeadCoalesce = 1, -1
	f.relay = New(o)
	f.tmp.slow = func() { f.advance(2 * time.Second) }
	const n = 20
	for i := range n {
		f.record(t, fmt.Sprintf("evt_%02d", i), "lead.created", fmt.Sprintf(`{"site_id":"site_%02d","lead_id":"lead_1"}`, i))
	}
	if k, err := f.relay.DispatchOnce(t.Context(), store.LaneBulk); err != nil || k != n {
		t.Fatalf("claimed %d, %v; want %d", k, err, n)
	}
	// Signals start at 0, 2, …, 14 s: eight within the first 15 s.
	if got := len(f.tmp.signals); got != 8 {
		t.Errorf("%d events signalled in the first half of their lease, want 8", got)
	}
	if got := f.relay.claimSize(store.LaneBulk); got != 8 {
		t.Errorf("the next claim takes %d, want the 8 that went out in time", got)
	}
	is, err := f.st.InboxStatus(t.Context())
	if err != nil || is.Undispatched != n-8 {
		t.Fatalf("inbox status %+v, %v; want %d undispatched", is, err, n-8)
	}
	// Still leased: nothing to claim until the lease runs out.
	if k, _ := f.relay.DispatchOnce(t.Context(), store.LaneBulk); k != 0 {
		t.Errorf("claimed %d events whose lease had not run out", k)
	}
	f.advance(15 * time.Second) // 31 s after the claim
	for range 3 {
		if _, err := f.relay.DispatchOnce(t.Context(), store.LaneBulk); err != nil {
			t.Fatal(err)
		}
		f.advance(31 * time.Second)
	}
	if is, _ := f.st.InboxStatus(t.Context()); is.Undispatched != 0 {
		t.Errorf("%d events still undispatched", is.Undispatched)
	}
	if len(f.tmp.signals) != n {
		t.Errorf("%d lead syncs signalled, want %d", len(f.tmp.signals), n)
	}
	for wf, c := range f.tmp.signals {
		if c != 1 {
			t.Errorf("%s signalled %d times, want once", wf, c)
		}
	}
}

// claimLog is the relay's store, noting how many events each claim of the
// bulk lane asked for and how many it took.
type claimLog struct {
	*store.Store
	mu     sync.Mutex
	limits []int
	got    []int
}

func (c *claimLog) ClaimEvents(ctx context.Context, lane store.Lane, limit int, lease time.Duration) ([]store.InboxEvent, error) {
	evs, err := c.Store.ClaimEvents(ctx, lane, limit, lease)
	if lane == store.LaneBulk && err == nil {
		c.mu.Lock()
		c.limits, c.got = append(c.limits, limit), append(c.got, len(evs))
		c.mu.Unlock()
	}
	return evs, err
}

func (c *claimLog) claims() (limits, got []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.limits), slices.Clone(c.got)
}

// TestRelayRampsUpItsClaims runs the relay over a backlog: the first claim
// takes twice Parallel events, each next one twice as many up to the
// batch, so that the signals start before a whole batch is read; once the
// lane is drained, the next burst starts small again. DispatchOnce called
// on its own still claims a whole batch.
func TestRelayRampsUpItsClaims(t *testing.T) {
	f := newRelayFixture(t, store.SQLite, 0)
	log := &claimLog{Store: f.st}
	relay := New(Options{Store: log, Temporal: f.tmp, TaskQueue: "q", Now: f.clock, Metrics: NewMetrics(prometheus.NewRegistry()),
		Pipelines: 1, Parallel: 4, BulkBatch: 50, LeadCoalesce: -1, Idle: time.Hour})
	lead := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			f.record(t, fmt.Sprintf("evt_%03d", i), "lead.created", fmt.Sprintf(`{"site_id":"site_%03d","lead_id":"lead_1"}`, i))
		}
	}
	drained := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			is, err := f.st.InboxStatus(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if is.Undispatched == 0 && is.Total == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("inbox %+v after 20 s, want all %d events dispatched", is, n)
			}
			time.Sleep(5 * time.Millisecond) // polling the inbox, not waiting for a set time
		}
	}
	lead(0, 150)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = relay.Run(ctx) }()
	drained(150)
	// 8, 16, 32, then the batch: 50, 44 (the rest), then none.
	limits, got := log.claims()
	if want := []int{8, 16, 32, 50, 50}; len(limits) < len(want) || !slices.Equal(limits[:len(want)], want) {
		t.Errorf("the backlog's claims asked for %v (took %v), want %v first", limits, got, want)
	}
	n := len(limits)
	lead(150, 160)
	relay.Wake(store.LaneBulk)
	drained(160)
	if limits, got = log.claims(); len(limits) <= n || limits[n] != 8 {
		t.Errorf("after the lane was drained, claims asked for %v (took %v), want the next burst to start at 8", limits[n:], got[n:])
	}
	cancel()
	<-done

	// DispatchOnce outside Run: a whole batch at once.
	lead(160, 230)
	if k, err := relay.DispatchOnce(t.Context(), store.LaneBulk); err != nil || k != 50 {
		t.Errorf("DispatchOnce claimed %d, %v; want a whole batch of 50", k, err)
	}
}
