package relay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// contractTypes are the event types of the contract's "Event types" table
// (../shared/agent-site-api.md), the retired domain.activated included.
var contractTypes = []string{
	"site.published", "site.unpublished", "lead.created", "conversation.started",
	"conversation.message.created", "knowledge.ready", "broadcast.sent", "domain.activated",
}

// TestRouteTableCoversTheContract checks that the route table has exactly
// one row for each event type of the contract, and of the client's and the
// simulator's list (webhook.EventTypes, which simulator's
// TestCrossCheckEventTypes holds to the simulator's catalogue, and the
// retired type), and none for anything else.
func TestRouteTableCoversTheContract(t *testing.T) {
	var listed []string
	for _, e := range append(webhook.EventTypes(), webhook.DomainActivated) {
		listed = append(listed, string(e))
	}
	if got, want := slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(contractTypes)); !slices.Equal(got, want) {
		t.Fatalf("the client and the simulator list %q, the contract %q", got, want)
	}
	rows := map[string]int{}
	for _, rt := range Routes {
		rows[rt.Type]++
	}
	for _, typ := range contractTypes {
		if rows[typ] != 1 {
			t.Errorf("%s has %d rows in Routes, want 1", typ, rows[typ])
		}
		delete(rows, typ)
	}
	for typ := range rows {
		t.Errorf("Routes has a row for %q, which is no event type of the contract", typ)
	}
	if VerifiedRoute.Type != store.KindEndpointVerified || !VerifiedRoute.Routed() {
		t.Errorf("VerifiedRoute routes %q (signal %q), want the %s record to a rotation", VerifiedRoute.Type, VerifiedRoute.Signal, store.KindEndpointVerified)
	}
	for _, rt := range append(slices.Clone(Routes), VerifiedRoute) {
		if rt.Routed() && (rt.Target.Name == "" || rt.Via == 0 || rt.Arg == nil) {
			t.Errorf("%s signals %s but names no target, way to it or argument: %+v", rt.Type, rt.Signal, rt)
		}
		if rt.Batch && rt.Via != ViaSite {
			t.Errorf("%s batches by site but finds its target another way (Via %d)", rt.Type, rt.Via)
		}
	}
}

// TestLaneForReadsTheTable checks that the lane the handler records an
// event in is its row's, and the bulk lane for a type without a row.
func TestLaneForReadsTheTable(t *testing.T) {
	for _, rt := range Routes {
		if got := LaneFor(rt.Type); got != rt.Lane {
			t.Errorf("LaneFor(%s) = %s, want its row's %s", rt.Type, laneName(got), laneName(rt.Lane))
		}
	}
	if got := LaneFor("lead.deleted"); got != store.LaneBulk {
		t.Errorf("LaneFor of a type without a row = %s, want bulk", laneName(got))
	}
}

// call is a signal the relay sent.
type call struct {
	workflowID, signal string
	withStart          bool
	workflow           string // the type a SignalWithStart starts
	arg                any
}

// signalLog records the signals that reached a workflow and answers each
// (a lead sync runs once a SignalWithStart has started it: notRunning).
type signalLog struct {
	mu      sync.Mutex
	calls   []call
	started map[string]bool
}

func (l *signalLog) SignalWorkflow(_ context.Context, wf, _, signal string, arg any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if notRunning(wf, nil, l.started) {
		return serviceerror.NewNotFound("workflow not found")
	}
	l.calls = append(l.calls, call{workflowID: wf, signal: signal, arg: arg})
	return nil
}

func (l *signalLog) SignalWithStartWorkflow(_ context.Context, wf, signal string, arg any, _ client.StartWorkflowOptions, workflow any, _ ...any) (client.WorkflowRun, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started == nil {
		l.started = map[string]bool{}
	}
	l.started[wf] = true
	l.calls = append(l.calls, call{workflowID: wf, signal: signal, withStart: true, workflow: fmt.Sprint(workflow), arg: arg})
	return nil, nil
}

// TestRelayRoutesByTheTable records an event of every row (and the record
// of a verified endpoint) in its row's lane and dispatches it: a row with a
// target gets its signal, Signal or SignalWithStart as the row says, to a
// workflow of the row's kind; a row without one is ignored and signals
// nothing.
func TestRelayRoutesByTheTable(t *testing.T) {
	f := newRelayFixture(t, store.SQLite, 0)
	ctx := t.Context()
	log := &signalLog{}
	o := f.options()
	o.Temporal, o.LeadCoalesce = log, -1
	f.relay = New(o)
	if err := f.st.SetSiteWorkflow(ctx, "site_1", workflows.OnboardingID("acme")); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetRotation(ctx, "we_new", workflows.SecretRotationID("we_old")); err != nil {
		t.Fatal(err)
	}
	for _, rt := range append(slices.Clone(Routes), VerifiedRoute) {
		t.Run(rt.Type, func(t *testing.T) {
			log.calls = nil
			id := "evt_" + strings.NewReplacer(".", "_", "-", "_").Replace(rt.Type)
			if rt.Type == store.KindEndpointVerified {
				if _, err := f.st.RecordEvent(ctx, store.InboxEvent{EventID: "verified:we_new", Kind: rt.Type, Lane: rt.Lane, EndpointID: "we_new",
					SubjectEventID: "evt_subject", ReceivedAt: f.clock(), Body: []byte{}}); err != nil {
					t.Fatal(err)
				}
			} else {
				f.record(t, id, rt.Type, `{"site_id":"site_1","lead_id":"lead_1","knowledge_id":"kn_1","status":"published"}`)
			}
			if n, err := f.relay.DispatchOnce(ctx, rt.Lane); err != nil || n != 1 {
				t.Fatalf("a claim of the %s lane took %d events (%v), want the one recorded", laneName(rt.Lane), n, err)
			}
			if !rt.Routed() {
				if len(log.calls) != 0 {
					t.Errorf("signals %+v for a type without a target, want none", log.calls)
				}
				return
			}
			if len(log.calls) != 1 {
				t.Fatalf("signals %+v, want one", log.calls)
			}
			c := log.calls[0]
			if c.signal != rt.Signal || c.withStart != (rt.Start != nil) || !strings.HasPrefix(c.workflowID, rt.Target.Prefix) {
				t.Errorf("sent %q to %s (with start: %t); want its row's %q to a %s… workflow (with start: %t)",
					c.signal, c.workflowID, c.withStart, rt.Signal, rt.Target.Prefix, rt.Start != nil)
			}
			if c.withStart && c.workflow != rt.Target.Name {
				t.Errorf("SignalWithStart starts %s, want %s", c.workflow, rt.Target.Name)
			}
		})
	}
}

// TestWhatTargetsRememberComesFromWorkflows checks that what the route
// table tells of a lead sync's and a lead event shard's memory (Memories,
// for siteops events replay's help) is workflows.RecentEventsKept and
// workflows.ShardEventsKept.
func TestWhatTargetsRememberComesFromWorkflows(t *testing.T) {
	rt, ok := RouteFor(string(webhook.LeadCreated))
	if !ok || rt.Remembers != workflows.RecentEventsKept {
		t.Fatalf("lead.created's row remembers %d, want workflows.RecentEventsKept (%d)", rt.Remembers, workflows.RecentEventsKept)
	}
	ms := Memories()
	for _, want := range []string{
		fmt.Sprintf("a lead sync remembers the last %s lead.created ids", thousands(workflows.RecentEventsKept)),
		fmt.Sprintf("a lead event shard (SITEOPS_LEAD_SHARDS) remembers the last %s lead.created ids it counted, over all its sites", thousands(workflows.ShardEventsKept)),
	} {
		if !slices.ContainsFunc(ms, func(m string) bool { return strings.HasPrefix(m, want) }) {
			t.Errorf("Memories() = %q, want one starting %q", ms, want)
		}
	}
	for _, tc := range []struct {
		n    int
		want string
	}{{7, "7"}, {1000, "1,000"}, {25000, "25,000"}, {1234567, "1,234,567"}} {
		if got := thousands(tc.n); got != tc.want {
			t.Errorf("thousands(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestRelayStartsOnlyALeadSyncThatIsNotRunning dispatches two lead.created
// events of one site, a dispatch apart, and a third after that lead sync
// ended: the first starts it (SignalWithStart, after the plain signal
// found no workflow), the second is a plain signal to the running one, and
// the third starts it again.
func TestRelayStartsOnlyALeadSyncThatIsNotRunning(t *testing.T) {
	f := newRelayFixture(t, store.SQLite, 0)
	log := &signalLog{}
	o := f.options()
	o.Temporal, o.LeadCoalesce = log, -1
	f.relay = New(o)
	wf := workflows.LeadSyncID("site_1")
	for i, want := range []bool{true, false, true} {
		if i == 2 {
			log.mu.Lock()
			delete(log.started, wf) // the lead sync ended
			log.mu.Unlock()
		}
		log.calls = nil
		f.record(t, fmt.Sprintf("evt_%d", i), "lead.created", `{"site_id":"site_1","lead_id":"lead_1"}`)
		if n, err := f.relay.DispatchOnce(t.Context(), store.LaneBulk); err != nil || n != 1 {
			t.Fatalf("event %d: a claim took %d events (%v), want 1", i, n, err)
		}
		if len(log.calls) != 1 || log.calls[0].workflowID != wf || log.calls[0].withStart != want {
			t.Errorf("event %d: signals %+v, want one to %s with start: %t", i, log.calls, wf, want)
		}
	}
}

// TestOnboardingsReadTheTypesRoutedToThem checks that the event types an
// onboarding reads from the inbox while it waits (store.SiteEventTypes)
// are exactly those whose row routes them to the site's onboarding: a type
// routed there but not read would need its signal, which a run that was
// not listening never gets.
func TestOnboardingsReadTheTypesRoutedToThem(t *testing.T) {
	var routed []string
	for _, rt := range Routes {
		if rt.Routed() && rt.Via == ViaSiteWorkflow {
			routed = append(routed, rt.Type)
		}
	}
	if got, want := slices.Sorted(slices.Values(routed)), slices.Sorted(slices.Values(store.SiteEventTypes)); !slices.Equal(got, want) {
		t.Errorf("the route table sends %q to onboardings; the store reads %q for them", got, want)
	}
}

// TestStartedTypesAreTheRoutesThatStart checks StartedTypes, which the
// Temporal server's role policy lets the ingress start: the target
// of every route with a Start is in it, every type in it is such a
// target, and it is sorted, each type once.
func TestStartedTypesAreTheRoutesThatStart(t *testing.T) {
	got := StartedTypes()
	routes := append(slices.Clone(Routes), LeadEventsRoute)
	starts := func(typ string) bool {
		return slices.ContainsFunc(routes, func(rt Route) bool { return rt.Start != nil && rt.Target.Name == typ })
	}
	for _, rt := range routes {
		if rt.Start != nil && !slices.Contains(got, rt.Target.Name) {
			t.Errorf("route %s starts %s, which StartedTypes() = %v leaves out", rt.Type, rt.Target.Name, got)
		}
	}
	for _, typ := range got {
		if !starts(typ) {
			t.Errorf("StartedTypes() names %s, which no route starts", typ)
		}
	}
	if len(got) == 0 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("StartedTypes() = %v; want the started types, sorted, each once", got)
	}
}

// TestSentSignalsAreTheRoutesSignals checks SentSignals, which the
// Temporal server's role policy lets the ingress send: every route with a
// target has its signal to its target's prefix in it, and nothing else is.
func TestSentSignalsAreTheRoutesSignals(t *testing.T) {
	got := SentSignals()
	want := map[Signal]bool{}
	for _, rt := range append(Routes[:len(Routes):len(Routes)], LeadEventsRoute, VerifiedRoute) {
		if rt.Target.Name != "" {
			want[Signal{rt.Target.Prefix, rt.Signal}] = true
		}
	}
	if len(got) != len(want) {
		t.Errorf("SentSignals = %v, want each of %v once", got, want)
	}
	for _, s := range got {
		if !want[s] || s.Prefix == "" || s.Name == "" {
			t.Errorf("SentSignals holds %v, which no route sends", s)
		}
	}
}
