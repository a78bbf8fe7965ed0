package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// unreachable is a Temporal no call reaches.
type unreachable struct{}

var errUnreachable = errors.New("connection refused")

func (unreachable) SignalWorkflow(context.Context, string, string, string, any) error {
	return errUnreachable
}

func (unreachable) SignalWithStartWorkflow(context.Context, string, string, any, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return nil, errUnreachable
}

// relayFixture is an inbox in SQLite and a relay over it, as a running
// siteops ingress has.
type relayFixture struct {
	st    *store.Store
	relay *relay.Relay
}

func newRelayFixture(t *testing.T) *relayFixture {
	t.Helper()
	st := storetest.Open(t, store.SQLite)
	return &relayFixture{st: st, relay: relay.New(relay.Options{Store: st, Temporal: unreachable{}, TaskQueue: "q"})}
}

// record records a verified delivery of the event in the inbox.
func (f *relayFixture) record(t *testing.T, id, typ, data string) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":%s}`, id, typ, data)
	if _, err := f.st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: typ, Lane: relay.LaneFor(typ), EndpointID: store.EnvEndpoint, ReceivedAt: time.Now(), Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

// dispatchAll runs one claim of each lane.
func (f *relayFixture) dispatchAll(t *testing.T) {
	t.Helper()
	for _, lane := range []store.Lane{store.LanePriority, store.LaneBulk} {
		if _, err := f.relay.DispatchOnce(t.Context(), lane); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplayAndAwait replays an event that had no workflow to go to, as
// `siteops events replay --wait` does: a dry run changes nothing, an id
// the inbox does not hold replays nothing, the replay says what it can
// change, a wait that times out or is interrupted before the relay
// dispatched it says how many stay queued and what goes on, and once the relay has handled it the wait fills in what
// became of it.
func TestReplayAndAwait(t *testing.T) {
	f := newRelayFixture(t)
	f.record(t, "evt_nt", "knowledge.ready", `{"site_id":"site_none","knowledge_id":"k_1"}`)
	f.dispatchAll(t)
	ctx := t.Context()

	dry, err := ReplayEvents(ctx, f.st, ReplayRequest{IDs: []string{"evt_nt"}, DryRun: true, Operator: "alice"})
	if err != nil || len(dry.Replayed) != 1 || !dry.DryRun {
		t.Fatalf("dry run = %+v, %v; want the event, marked as a dry run", dry, err)
	}
	if d, err := f.st.Event(ctx, "evt_nt"); err != nil || d.Replays != 0 {
		t.Fatalf("after a dry run the event has %d replays (%v), want 0", d.Replays, err)
	}
	if _, err := ReplayEvents(ctx, f.st, ReplayRequest{IDs: []string{"evt_nt", "evt_missing"}, Operator: "alice"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("replaying an id the inbox does not hold = %v, want store.ErrNotFound", err)
	}
	if d, _ := f.st.Event(ctx, "evt_nt"); d.Replays != 0 {
		t.Fatalf("a refused replay replayed the event (%d replays), want none", d.Replays)
	}

	res, err := ReplayEvents(ctx, f.st, ReplayRequest{IDs: []string{"evt_nt"}, Operator: "alice"})
	if err != nil || len(res.Replayed) != 1 {
		t.Fatalf("replay = %+v, %v; want one event", res, err)
	}
	r := res.Replayed[0]
	if r.PreviousStatus != store.OutcomeNoTarget || r.Replay != 1 || r.Type != "knowledge.ready" || !strings.Contains(r.Note, "had no workflow to go to") {
		t.Errorf("replayed %+v; want previous status %s, replay 1, type knowledge.ready and a note about the missing workflow", r, store.OutcomeNoTarget)
	}

	var pending *ReplaysPendingError
	err = AwaitReplays(ctx, f.st, res.Replayed, 10*time.Millisecond, 50*time.Millisecond)
	if !errors.As(err, &pending) || pending.Left != 1 || pending.Total != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait that ends before the relay dispatched = %v, want *ReplaysPendingError for 1 of 1, matching the deadline", err)
	}
	if want := "1 of 1 replayed event(s) not dispatched after 50ms (--timeout): is siteops ingress running against this store? They stay queued"; err.Error() != want {
		t.Errorf("a wait that timed out says %q, want %q", err, want)
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	err = AwaitReplays(stopped, f.st, res.Replayed, 10*time.Millisecond, 0)
	if want := "stopped waiting; 1 of 1 replayed event(s) stay queued and the relay of a running siteops ingress dispatches them — siteops events list --pending"; err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Errorf("an interrupted wait = %v, want %q, matching context.Canceled", err, want)
	}

	f.dispatchAll(t)
	if err := AwaitReplays(ctx, f.st, res.Replayed, 10*time.Millisecond, 0); err != nil {
		t.Fatalf("a wait after the relay dispatched = %v, want nil", err)
	}
	if got := res.Replayed[0].Status; got != store.OutcomeNoTarget {
		t.Errorf("the wait saw the replayed event become %q, want %q", got, store.OutcomeNoTarget)
	}
}

// TestReplayNotes checks what a replay says it can change, by the state
// the event was in.
func TestReplayNotes(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    store.Replayed
		want string
	}{
		{"a lead reached its sync", store.Replayed{EventRecord: store.EventRecord{EventType: "lead.created", Outcome: store.OutcomeSignalled}, WorkflowID: "lead-sync/s"},
			"had reached lead-sync/s, which deduplicates by event id: a lead sync remembers the last 1,000"},
		{"a lead reached its shard", store.Replayed{EventRecord: store.EventRecord{EventType: "lead.created", Outcome: store.OutcomeSignalled}, WorkflowID: "lead-events/3"},
			"had reached lead-events/3, which deduplicates by event id: a lead event shard (SITEOPS_LEAD_SHARDS) remembers the last 5,000 lead.created ids it counted, over all its sites"},
		{"a verified delivery reached its rotation", store.Replayed{EventRecord: store.EventRecord{Kind: store.KindEndpointVerified, Outcome: store.OutcomeSignalled}, WorkflowID: "secret-rotation/we_1"},
			"a secret rotation acts on its first verified delivery only"},
		{"a dead letter", store.Replayed{EventRecord: store.EventRecord{Outcome: store.OutcomeDead, Failures: 20, LastError: "signalling x:\n\nunavailable"}},
			"a dead letter after 20 failed attempts in a row (signalling x:; unavailable); it gets 20 attempts again"},
		{"an ignored type", store.Replayed{EventRecord: store.EventRecord{EventType: "conversation.started", Outcome: store.OutcomeIgnored}},
			"no workflow waits for conversation.started events"},
		{"a failing event", store.Replayed{EventRecord: store.EventRecord{Failures: 3, LastError: strings.Repeat("x", 100)}},
			"was failing (3 attempts: " + strings.Repeat("x", 79) + "…); due again now"},
		{"a pending event", store.Replayed{}, "was still waiting for the relay; due now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := replayNote(tc.r); !strings.Contains(got, tc.want) {
				t.Errorf("replayNote = %q, want it to say %q", got, tc.want)
			}
		})
	}
}

// TestReplayNoteTellsWhatALeadSyncRemembers checks that the replay note
// of an event that reached a lead sync says what the route table says it
// remembers: the last workflows.RecentEventsKept ids.
func TestReplayNoteTellsWhatALeadSyncRemembers(t *testing.T) {
	want := fmt.Sprintf("a lead sync remembers the last %s lead.created ids", humanize(workflows.RecentEventsKept))
	note := replayNote(store.Replayed{EventRecord: store.EventRecord{EventType: "lead.created", Outcome: store.OutcomeSignalled}, WorkflowID: "lead-sync/s"})
	if !strings.Contains(note, want) {
		t.Errorf("the replay note says %q, want it to contain %q", note, want)
	}
}

// humanize writes n with a comma between thousands, as the notes do.
func humanize(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
