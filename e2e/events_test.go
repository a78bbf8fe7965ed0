package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// post delivers a signed event to the ingress at url and returns the
// status and the body it sent.
func post(t *testing.T, url, secret, id, typ, data string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-22T09:00:00.000Z","data":%s}`, id, typ, data)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/webhooks", strings.NewReader(body))
	req.Header.Set("svc-event-id", id)
	req.Header.Set("svc-event-type", typ)
	req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, body
}

// eventList is `events list -o json`.
type eventList struct {
	Events []struct {
		EventID   string `json:"event_id"`
		Type      string `json:"type"`
		SiteID    string `json:"site_id"`
		Status    string `json:"status"`
		Attempts  int    `json:"attempts"`
		Replays   int    `json:"replays"`
		LastError string `json:"last_error"`
	} `json:"events"`
	NextPage         *string    `json:"next_page"`
	OldestReceivedAt *time.Time `json:"oldest_received_at"`
}

func (l eventList) ids() []string {
	var out []string
	for _, e := range l.Events {
		out = append(out, e.EventID)
	}
	return out
}

// eventShow is the part of `events show -o json` the tests read.
type eventShow struct {
	EventID      string `json:"event_id"`
	Status       string `json:"status"`
	Replays      int    `json:"replays"`
	ReplayedBy   string `json:"replayed_by"`
	Body         string `json:"body"`
	Verification struct {
		Receiver   string `json:"receiver"`
		EndpointID string `json:"endpoint_id"`
		Secret     string `json:"secret"`
	} `json:"verification"`
	Workflow *struct {
		WorkflowID string `json:"workflow_id"`
		RunID      string `json:"run_id"`
	} `json:"workflow"`
	History []struct {
		Kind       string `json:"kind"`
		Attempt    int    `json:"attempt"`
		Replay     int    `json:"replay"`
		Outcome    string `json:"outcome"`
		WorkflowID string `json:"workflow_id"`
		RunID      string `json:"run_id"`
		Operator   string `json:"operator"`
	} `json:"history"`
}

// replayResult is `events replay -o json`.
type replayResult struct {
	Replayed []struct {
		EventID            string `json:"event_id"`
		PreviousStatus     string `json:"previous_status"`
		PreviousWorkflowID string `json:"previous_workflow_id"`
		Replay             int    `json:"replay"`
		Note               string `json:"note"`
		Status             string `json:"status"`
		WorkflowID         string `json:"workflow_id"`
		RunID              string `json:"run_id"`
	} `json:"replayed"`
	MoreMatched bool `json:"more_matched"`
}

// siteopsJSON runs the binary with -o json and decodes its output into v.
func (e *env) siteopsJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, errOut, code := e.runSplit(t, nil, "", append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("siteops %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("siteops %s printed %s (%v)", strings.Join(args, " "), out, err)
	}
}

func (e *env) waitOutcome(t *testing.T, id, want string) {
	t.Helper()
	siteopstest.Eventually(t, 30*time.Second, id+" to be "+want, func() bool {
		got, _, _ := e.Store.InboxOutcome(t.Context(), id)
		return got == want
	})
}

// TestEventsReplayAfterALateStart records events through the ingress
// process before the workflows they are for exist, then replays them with
// the binary: knowledge.ready for a site whose onboarding started late
// (no-target; the onboarding reads them from the inbox and publishes with
// both sources ready, so the replay finds it ended), and lead.created
// twice: to the lead
// sync that already had it (it counts a duplicate: nothing changes), and
// after that lead sync was terminated, when the replay starts a new run
// that syncs leads the old one never saw.
func TestEventsReplayAfterALateStart(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, d, simulator.Config{})
			e.startWorker(t)
			const secret = "whsec_events_e2e" //nolint:gosec // made up for the test
			url, log := e.startIngressProcess(t, "SITEOPS_WEBHOOK_SECRETS="+secret)
			leadSite := e.site(t, "leads") // site_1
			// The onboarding below creates the next site and knowledge
			// sources; the simulator numbers them in order.
			const site, kn1, kn2 = "site_2", "kn_1", "kn_2"

			var bodyK1 string
			for _, ev := range []struct{ id, typ, data string }{
				{"evt_k1", "knowledge.ready", `{"site_id":"` + site + `","knowledge_id":"` + kn1 + `"}`},
				{"evt_k2", "knowledge.ready", `{"site_id":"` + site + `","knowledge_id":"` + kn2 + `"}`},
				{"evt_l1", "lead.created", `{"site_id":"` + leadSite + `","lead_id":"lead_0"}`},
			} {
				code, body := post(t, url, secret, ev.id, ev.typ, ev.data)
				if code != http.StatusOK {
					t.Fatalf("delivering %s: %d\n%s", ev.id, code, log)
				}
				if ev.id == "evt_k1" {
					bodyK1 = body
				}
			}
			e.waitOutcome(t, "evt_k1", store.OutcomeNoTarget)
			e.waitOutcome(t, "evt_k2", store.OutcomeNoTarget)
			e.waitOutcome(t, "evt_l1", store.OutcomeSignalled)

			var all eventList
			e.siteopsJSON(t, &all, "events", "list")
			if !slices.Equal(all.ids(), []string{"evt_l1", "evt_k2", "evt_k1"}) || all.NextPage != nil || all.OldestReceivedAt == nil {
				t.Errorf("events list = %+v", all)
			}
			var noTarget eventList
			e.siteopsJSON(t, &noTarget, "events", "list", "--outcome", "no-target", "--since", "1h")
			if !slices.Equal(noTarget.ids(), []string{"evt_k2", "evt_k1"}) || noTarget.Events[0].SiteID != site || noTarget.Events[0].Attempts != 1 {
				t.Errorf("events list --outcome no-target = %+v", noTarget)
			}
			text, code := e.run(t, nil, "events", "list", "--site", site)
			if code != 0 || !strings.Contains(text, "evt_k1") || strings.Contains(text, "evt_l1") || !strings.Contains(text, "oldest kept event received") {
				t.Errorf("events list --site: exit %d\n%s", code, text)
			}
			text, code = e.run(t, nil, "events", "show", "evt_k1")
			if code != 0 || !strings.Contains(text, "SITEOPS_WEBHOOK_SECRETS") || !strings.Contains(text, "attempt 1  no-target") ||
				!strings.Contains(text, bodyK1) || strings.Contains(text, secret) {
				t.Errorf("events show evt_k1: exit %d\n%s", code, text)
			}
			var shown eventShow
			e.siteopsJSON(t, &shown, "events", "show", "evt_k1")
			if shown.Verification.Secret != "env" || shown.Verification.EndpointID != store.EnvEndpoint || shown.Body != bodyK1 ||
				len(shown.History) != 1 || shown.Workflow != nil {
				t.Errorf("events show -o json = %+v", shown)
			}

			// The onboarding starts late: its site is recorded now.
			p := prepare(t, "../examples/bayside-dental.json", "bayside")
			p.Input.WaitForKnowledge = true
			p.Input.KnowledgeTimeout = workflows.Duration(2 * time.Minute)
			o, err := e.Starter.Onboard(t.Context(), p)
			if err != nil {
				t.Fatal(err)
			}
			// Its wait is level-triggered: it reads the events the inbox
			// already holds and needs no replay.
			var res workflows.OnboardingResult
			if err := e.Starter.Wait(ctxWithin(t, time.Minute), o.Run, &res); err != nil {
				t.Fatalf("the onboarding that started late: %v", err)
			}
			if res.Status != "published" || res.KnowledgeReady != 2 || res.KnowledgeTimedOut || !slices.Equal(slices.Sorted(slices.Values(res.KnowledgeIDs)), []string{kn1, kn2}) {
				t.Errorf("onboarding result = %+v; want both sources ready through the events the inbox held", res)
			}
			var rr replayResult
			e.siteopsJSON(t, &rr, "events", "replay", "--outcome", "no-target", "--since", "1h", "--wait")
			if len(rr.Replayed) != 2 || rr.MoreMatched {
				t.Fatalf("replay --outcome no-target = %+v", rr)
			}
			for _, r := range rr.Replayed {
				if r.PreviousStatus != store.OutcomeNoTarget || r.Status != store.OutcomeTargetGone || r.WorkflowID != o.WorkflowID || r.Replay != 1 {
					t.Errorf("replayed %+v; want no-target, then target-gone at the finished %s", r, o.WorkflowID)
				}
			}

			// A replay of an event the lead sync already had: it says so,
			// and the lead sync counts a duplicate.
			siteopstest.Eventually(t, 30*time.Second, "the lead sync to count evt_l1", func() bool {
				p, err := e.Starter.LeadProgress(t.Context(), leadSite)
				return err == nil && p.Events == 1
			})
			text, code = e.run(t, nil, "events", "replay", "evt_l1", "--wait")
			if code != 0 || !strings.Contains(text, "had reached "+workflows.LeadSyncID(leadSite)) || !strings.Contains(text, "changes nothing there") ||
				!strings.Contains(text, "now signalled → "+workflows.LeadSyncID(leadSite)) {
				t.Errorf("events replay evt_l1: exit %d\n%s", code, text)
			}
			siteopstest.Eventually(t, 30*time.Second, "the lead sync to count the replay as a duplicate", func() bool {
				p, err := e.Starter.LeadProgress(t.Context(), leadSite)
				return err == nil && p.DuplicateEvents == 1 && p.Events == 1
			})

			// The lead sync is terminated; leads come that it does not see.
			// A replay starts it again (SignalWithStart): the new run has
			// not seen the event and syncs.
			if err := e.Client.TerminateWorkflow(t.Context(), workflows.LeadSyncID(leadSite), "", "events e2e: stopped"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Sim.CreateLeads(leadSite, 3); err != nil {
				t.Fatal(err)
			}
			var again replayResult
			e.siteopsJSON(t, &again, "events", "replay", "evt_l1", "--wait")
			if len(again.Replayed) != 1 || again.Replayed[0].Replay != 2 || again.Replayed[0].Status != store.OutcomeSignalled {
				t.Fatalf("second replay = %+v", again)
			}
			siteopstest.Eventually(t, 30*time.Second, "the new lead sync to store the 3 leads", func() bool {
				n, _ := e.Store.CountLeads(t.Context(), leadSite)
				return n == 3
			})
			var l1 eventShow
			e.siteopsJSON(t, &l1, "events", "show", "evt_l1")
			var runs []string
			for _, h := range l1.History {
				if h.Kind == store.HistoryAttempt {
					runs = append(runs, h.RunID)
				}
			}
			// The first replay reached the run the dispatch had: a plain
			// signal to the running lead sync, which says no run (""). The
			// second started a new run, and records it.
			if l1.Replays != 2 || l1.ReplayedBy != "oncall-e2e" || len(l1.History) != 5 || len(runs) != 3 || runs[1] != "" && runs[1] != runs[0] ||
				runs[2] == "" || runs[2] == runs[0] || l1.Workflow == nil || l1.Workflow.RunID != runs[2] {
				t.Errorf("evt_l1's history = %+v; want attempts in one run, the replay's in the run it started", l1)
			}
			_ = e.Client.TerminateWorkflow(t.Context(), workflows.LeadSyncID(leadSite), "", "test over")

			// Mistakes: exit 3 for an id the inbox does not hold (and no
			// replay at all), 2 for bad flags.
			for _, tc := range []struct {
				args []string
				code int
				want string
			}{
				{[]string{"events", "show", "evt_nope"}, 3, "not in the inbox"},
				{[]string{"events", "replay", "evt_nope", "evt_k1"}, 3, "nothing was replayed"},
				{[]string{"events", "replay"}, 2, "--outcome"},
				{[]string{"events", "replay", "evt_k1", "--outcome", "dead"}, 2, "not both"},
				{[]string{"events", "list", "--outcome", "lost"}, 2, "no-target"},
				{[]string{"events", "list", "--since", "yesterday"}, 2, "--since"},
				{[]string{"events", "list", "--page", "garbage!"}, 2, "page token"},
				{[]string{"events", "list", "--pending", "--outcome", "dead"}, 2, "--pending"},
				{[]string{"events"}, 2, "needs a subcommand"},
			} {
				out, code := e.run(t, nil, tc.args...)
				if code != tc.code || !strings.Contains(out, tc.want) {
					t.Errorf("siteops %s: exit %d, want %d with %q\n%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out)
				}
			}
			if d, _ := e.Store.Event(t.Context(), "evt_k1"); d.Replays != 1 {
				t.Errorf("a refused replay changed evt_k1: %d replays", d.Replays)
			}
		})
	}
}

// refusingTemporal fails every signal, as a Temporal that refuses the
// relay's calls does, until it is told to accept them.
type refusingTemporal struct {
	mu     sync.Mutex
	accept bool
}

type acceptedRun struct{ client.WorkflowRun }

func (acceptedRun) GetRunID() string { return "run-after-replay" }

func (r *refusingTemporal) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.accept {
		return nil
	}
	return errors.New("rpc error: code = Unavailable desc = connection refused")
}

// SignalWorkflow finds no workflow once Temporal answers: the relay then
// starts the lead sync with SignalWithStart, whose run the event records.
func (r *refusingTemporal) SignalWorkflow(context.Context, string, string, string, any) error {
	if err := r.err(); err != nil {
		return err
	}
	return serviceerror.NewNotFound("workflow not found")
}

func (r *refusingTemporal) SignalWithStartWorkflow(context.Context, string, string, any, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	if err := r.err(); err != nil {
		return nil, err
	}
	return acceptedRun{}, nil
}

// TestEventsDeadLettersAndPaging fills an inbox whose relay cannot reach
// Temporal until its events are dead letters, then lists them page by
// page and replays them with the binary; it needs no Temporal of its own.
func TestEventsDeadLettersAndPaging(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			dbURL := storetest.SQLiteURL(t)
			if d == store.Postgres {
				dbURL = storetest.PostgresSchemaURL(t)
			}
			// The relay's clock: moved past each backoff instead of waiting.
			var mu sync.Mutex
			now := time.Now()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			st, err := store.Open(t.Context(), dbURL, store.Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			e := &env{&testenv.Env{Namespace: "default", Store: st, DBURL: dbURL}}
			const n = 120
			// Received two hours ago: older than the retention the ingress
			// is started with at the end.
			at := time.Now().Add(-2 * time.Hour)
			for i := range n {
				id := fmt.Sprintf("evt_dl_%03d", i)
				body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_%d","lead_id":"lead_%d"}}`, id, i%7, i)
				if _, err := st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env",
					ReceivedAt: at.Add(time.Duration(i/2) * time.Millisecond), Body: []byte(body)}); err != nil {
					t.Fatal(err)
				}
			}
			// --pending lists what the relay has not handled: every event
			// before its first attempt (pending), after a failed one
			// (failing), and none once they are dead letters.
			e.expectPending(t, n, store.StatusPending)
			temporal := &refusingTemporal{}
			rl := relay.New(relay.Options{Store: st, Temporal: temporal, TaskQueue: taskQueue, MaxAttempts: 2, Now: clock})
			for attempt := range 2 {
				mu.Lock()
				now = now.Add(time.Minute) // past the backoff
				mu.Unlock()
				if k, err := rl.DispatchOnce(t.Context(), store.LaneBulk); err != nil || k != n {
					t.Fatalf("attempt %d claimed %d, %v", attempt+1, k, err)
				}
				if attempt == 0 {
					e.expectPending(t, n, store.StatusFailing)
				}
			}
			e.expectPending(t, 0, "")

			// Every page of 50, by the token of the one before.
			var seen []string
			args := []string{"events", "list", "--outcome", "dead", "--limit", "50"}
			for pages := 1; ; pages++ {
				var page eventList
				e.siteopsJSON(t, &page, args...)
				seen = append(seen, page.ids()...)
				for _, ev := range page.Events {
					if ev.Status != store.OutcomeDead || ev.Attempts != 2 || !strings.Contains(ev.LastError, "connection refused") {
						t.Fatalf("listed %+v; want a dead letter after 2 attempts", ev)
					}
				}
				if page.NextPage == nil {
					if pages != 3 {
						t.Errorf("%d pages of 50 for %d events", pages, n)
					}
					break
				}
				args = []string{"events", "list", "--outcome", "dead", "--limit", "50", "--page", *page.NextPage}
			}
			if len(seen) != n || len(slices.Compact(slices.Sorted(slices.Values(seen)))) != n {
				t.Errorf("paging listed %d events (%d distinct), want each of %d once", len(seen), len(slices.Compact(slices.Sorted(slices.Values(seen)))), n)
			}
			text, code := e.run(t, nil, "events", "list", "--outcome", "dead")
			if code != 0 || !strings.Contains(text, "next page: siteops events list --outcome dead --page ") || !strings.Contains(text, "siteops events replay --outcome dead") {
				t.Errorf("events list --outcome dead: exit %d\n%s", code, text)
			}

			// A dry run only reads: it answers while another connection
			// holds the write lock (SQLite) and the events' row locks
			// (PostgreSQL) that a replay would wait for.
			release := holdWriteLock(t, st)
			text, code = e.run(t, nil, "events", "replay", "--outcome", "dead", "--dry-run")
			release()
			if code != 0 || !strings.HasPrefix(text, "nothing changed (dry run); siteops events replay would queue 120 event(s) for the relay again") || !strings.Contains(text, "dead letter after 2 failed attempts") {
				t.Errorf("replay --dry-run while the store is locked for writing: exit %d\n%s", code, text)
			}
			if s, _ := st.InboxStatus(t.Context()); s.Dead != n {
				t.Fatalf("a dry run changed the inbox: %+v", s)
			}
			// Dead letters are replayed only when confirmed: in a pipe,
			// with --yes.
			text, code = e.run(t, nil, "events", "replay", "--outcome", "dead")
			if code != 2 || !strings.Contains(text, "add --yes") || !strings.Contains(text, "nothing changed") {
				t.Errorf("replay --outcome dead without --yes in a pipe: exit %d, want 2 naming --yes\n%s", code, text)
			}
			if s, _ := st.InboxStatus(t.Context()); s.Dead != n {
				t.Fatalf("a refused replay changed the inbox: %+v", s)
			}
			// Temporal is back; replay them all, with a bound to start.
			temporal.mu.Lock()
			temporal.accept = true
			temporal.mu.Unlock()
			var rr replayResult
			e.siteopsJSON(t, &rr, "events", "replay", "--outcome", "dead", "--limit", "100", "--yes")
			if len(rr.Replayed) != 100 || !rr.MoreMatched {
				t.Fatalf("replay --limit 100 replayed %d (more: %v)", len(rr.Replayed), rr.MoreMatched)
			}
			e.siteopsJSON(t, &rr, "events", "replay", "--outcome", "dead", "--yes")
			if len(rr.Replayed) != n-100 || rr.MoreMatched {
				t.Fatalf("the rest: replayed %d (more: %v)", len(rr.Replayed), rr.MoreMatched)
			}
			mu.Lock()
			now = now.Add(time.Minute) // past the interval a relay may hold a site's lead.created for
			mu.Unlock()
			if k, err := rl.DispatchOnce(t.Context(), store.LaneBulk); err != nil || k != n {
				t.Fatalf("after the replay the relay claimed %d, %v", k, err)
			}
			var left eventList
			e.siteopsJSON(t, &left, "events", "list", "--outcome", "dead")
			var shown eventShow
			e.siteopsJSON(t, &shown, "events", "show", "evt_dl_007")
			if len(left.Events) != 0 || shown.Status != store.OutcomeSignalled || len(shown.History) != 4 ||
				shown.History[1].Outcome != store.OutcomeDead || shown.History[3].Replay != 1 || shown.Workflow == nil || shown.Workflow.RunID != "run-after-replay" {
				t.Errorf("after the replay: %d dead letters left; evt_dl_007 = %+v", len(left.Events), shown)
			}

			// Retention, as the ingress process reads it: an old dead
			// letter and a recent handled event stay, the 120 handled
			// events received two hours ago go.
			record := func(id string, at time.Time) {
				t.Helper()
				body := `{"id":"` + id + `","type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_r","lead_id":"lead_r"}}`
				if _, err := st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env",
					ReceivedAt: at, Body: []byte(body)}); err != nil {
					t.Fatal(err)
				}
			}
			oldDeadAt := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Millisecond)
			record("evt_old_dead", oldDeadAt)
			temporal.mu.Lock()
			temporal.accept = false
			temporal.mu.Unlock()
			for range 2 {
				mu.Lock()
				now = now.Add(time.Minute)
				mu.Unlock()
				if k, err := rl.DispatchOnce(t.Context(), store.LaneBulk); err != nil || k != 1 {
					t.Fatalf("the old event's attempt claimed %d, %v", k, err)
				}
			}
			temporal.mu.Lock()
			temporal.accept = true
			temporal.mu.Unlock()
			record("evt_recent", time.Now())
			mu.Lock()
			now = now.Add(time.Minute)
			mu.Unlock()
			if k, err := rl.DispatchOnce(t.Context(), store.LaneBulk); err != nil || k != 1 {
				t.Fatalf("the recent event's attempt claimed %d, %v", k, err)
			}
			if out, code := e.run(t, []string{"SITEOPS_INBOX_RETENTION=0s"}, "ingress"); code == 0 || !strings.Contains(out, "SITEOPS_INBOX_RETENTION=0s must be a positive duration") {
				t.Errorf("an ingress with SITEOPS_INBOX_RETENTION=0s: exit %d\n%s", code, out)
			}
			_, ingressLog := e.startIngressProcess(t, "SITEOPS_INBOX_RETENTION=1h", "SITEOPS_WEBHOOK_SECRETS=whsec_retention_e2e")
			siteopstest.Eventually(t, 30*time.Second, "the ingress to purge the handled events older than an hour", func() bool {
				_, code := e.run(t, nil, "events", "show", "evt_dl_007")
				return code == 3
			})
			var kept eventList
			e.siteopsJSON(t, &kept, "events", "list")
			if !slices.Equal(kept.ids(), []string{"evt_recent", "evt_old_dead"}) || kept.Events[1].Status != store.OutcomeDead ||
				kept.OldestReceivedAt == nil || !kept.OldestReceivedAt.Equal(oldDeadAt) {
				t.Errorf("after the purge, events list = %+v (oldest %v); want the recent event and the old dead letter, oldest %v\n%s",
					kept.ids(), kept.OldestReceivedAt, oldDeadAt, ingressLog)
			}
			if !strings.Contains(ingressLog.String(), "purged old inbox events") || !strings.Contains(ingressLog.String(), "count="+itoa(n)) {
				t.Errorf("the ingress did not say it purged %d events:\n%s", n, ingressLog)
			}
		})
	}
}

// expectPending checks that `events list --pending` lists want events,
// each in state status.
func (e *env) expectPending(t *testing.T, want int, status string) {
	t.Helper()
	var l eventList
	e.siteopsJSON(t, &l, "events", "list", "--pending", "--limit", "1000")
	if len(l.Events) != want {
		t.Fatalf("events list --pending listed %d events, want %d", len(l.Events), want)
	}
	for _, ev := range l.Events {
		if ev.Status != status {
			t.Fatalf("events list --pending listed %+v, want %s", ev, status)
		}
	}
}

// holdWriteLock opens a transaction on st that writes every inbox row, so
// that it holds SQLite's write lock and PostgreSQL's row locks until the
// returned function rolls it back.
func holdWriteLock(t *testing.T, st *store.Store) func() {
	t.Helper()
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), `UPDATE inbox SET replays = replays`); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback() }
}
