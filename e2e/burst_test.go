package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// soak reports whether the long versions of the scenarios run
// (`make soak` sets SITEOPS_SOAK=1); make test runs short ones.
func soak() bool { return os.Getenv("SITEOPS_SOAK") != "" }

// size is n at full size (make soak), short otherwise.
func size(full, short int) int {
	if soak() {
		return full
	}
	return short
}

// TestBurstKeepsLeadSyncHistoriesSmall sends a burst of lead.created for
// one site through the ingress: the relay wakes the lead sync with batched
// signals, the sync continues as new well before Temporal's limits, every
// run's history stays under 2,000 events, and no lead or event is lost.
func TestBurstKeepsLeadSyncHistoriesSmall(t *testing.T) {
	n := size(20_000, 5_000)
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	in := e.startIngress(t)
	e.register(t, in, "/webhooks/main", "lead.created")
	site := e.site(t, "burst")
	start := time.Now()
	if _, err := e.Sim.CreateLeads(site, n); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 5*time.Minute, fmt.Sprintf("%d deliveries dispatched", n), func() bool {
		st, _ := e.Store.InboxStatus(t.Context())
		return st.Total >= n && st.Undispatched == 0
	})
	siteopstest.Eventually(t, 2*time.Minute, "the lead sync to count every event and store every lead", func() bool {
		p, err := e.Starter.LeadProgress(t.Context(), site)
		return err == nil && p.Events == n && p.Leads == n && p.CaughtUp && !p.Syncing
	})
	t.Logf("%d events through the ingress to the lead sync in %s", n, time.Since(start).Round(time.Millisecond))
	assertStoreEqualsSim(t, e, site)
	runs := leadSyncRuns(t, e, site)
	largest := slices.Max(runs)
	t.Logf("%d runs of lead-sync/%s, history lengths %v", len(runs), site, runs)
	if largest >= 2000 {
		t.Errorf("the largest lead-sync history holds %d events, want under 2,000", largest)
	}
	p, _ := e.Starter.LeadProgress(t.Context(), site)
	if p.Events != n {
		t.Errorf("the lead sync counted %d distinct events, want %d", p.Events, n)
	}
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
	_ = e.Client.GetWorkflow(t.Context(), workflows.LeadSyncID(site), "").Get(t.Context(), nil)
	recordHistory(t, e, workflows.LeadSyncID(site), "lead_sync_burst")
}

// leadSyncRuns returns the history length of every run of a site's lead
// sync (continued-as-new and current).
func leadSyncRuns(t *testing.T, e *env, site string) []int {
	t.Helper()
	id := workflows.LeadSyncID(site)
	var lengths []int
	var token []byte
	for {
		resp, err := e.Client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: e.Namespace, Query: fmt.Sprintf("WorkflowId = '%s'", id), NextPageToken: token,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range resp.GetExecutions() {
			d, err := e.Client.DescribeWorkflow(t.Context(), id, info.GetExecution().GetRunId())
			if err != nil {
				t.Fatal(err)
			}
			lengths = append(lengths, int(d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength()))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if len(lengths) == 0 {
		t.Fatalf("no run of %s", id)
	}
	return lengths
}

// TestWaitedForEventsPassBulkOnes keeps 5,000 lead.created pending in the
// inbox and records a knowledge.ready for a waiting onboarding twenty
// times: each is dispatched within a second (the slowest of twenty), as it
// goes to the priority lane. Under the race detector (make test) the bound
// is scaled; make soak runs it without.
func TestWaitedForEventsPassBulkOnes(t *testing.T) {
	const backlog = 5000
	e := newEnv(t, store.SQLite, simulator.Config{})
	// An onboarding that waits for knowledge.ready (no worker: it waits).
	run, err := e.Client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "onboarding/waiting", TaskQueue: taskQueue},
		workflows.OnboardingWorkflowName, workflows.OnboardingInput{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.SetSiteWorkflow(t.Context(), "site_waiting", run.GetID()); err != nil {
		t.Fatal(err)
	}
	rl := relay.New(relay.Options{Store: e.Store, Temporal: e.Client, TaskQueue: taskQueue, Idle: 200 * time.Millisecond})
	bulk := 0
	// fill tops the bulk lane up to half as much again as the backlog, in
	// one transaction, so that at least the backlog is still pending while
	// a try runs.
	fill := func() {
		st, _ := e.Store.InboxStatus(t.Context())
		tx, err := e.Store.DB().BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for ; st.Undispatched < backlog*3/2; st.Undispatched++ {
			id := fmt.Sprintf("evt_bulk_%06d", bulk)
			body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_b%03d","lead_id":"lead_%d"}}`, id, bulk%300, bulk)
			if _, err := tx.ExecContext(t.Context(), `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, next_attempt_at)
				VALUES ($1, 'lead.created', 'webhook', $2, '', 'env', $3, $4, $3)`, id, int(store.LaneBulk), time.Now().UTC(), []byte(body)); err != nil {
				t.Fatal(err)
			}
			bulk++
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	fill()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = rl.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	var took []time.Duration
	for i := range 20 {
		fill()
		if st, _ := e.Store.InboxStatus(t.Context()); st.Undispatched < backlog {
			t.Fatalf("only %d events pending", st.Undispatched)
		}
		id := fmt.Sprintf("evt_ready_%02d", i)
		body := fmt.Sprintf(`{"id":%q,"type":"knowledge.ready","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_waiting","knowledge_id":"kn_%d"}}`, id, i)
		start := time.Now()
		if _, err := e.Store.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: "knowledge.ready", Lane: relay.LaneFor("knowledge.ready"), EndpointID: "env", ReceivedAt: start, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		rl.Wake(store.LanePriority)
		for {
			out, _, _ := e.Store.InboxOutcome(t.Context(), id)
			if out != "" {
				if out != store.OutcomeSignalled {
					t.Fatalf("%s: outcome %q", id, out)
				}
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s not dispatched after 10 s", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("knowledge.ready dispatch with %d lead.created pending: p50 %s, slowest of 20 %s", backlog, took[10].Round(time.Millisecond), took[19].Round(time.Millisecond))
	bound := siteopstest.BoundRace(time.Second, 5*time.Second) // make soak checks 1 s
	if took[19] > bound {
		t.Errorf("the slowest knowledge.ready of 20 took %s, want under %s", took[19], bound)
	}
	_ = e.Client.TerminateWorkflow(t.Context(), run.GetID(), "", "test over")
}

// TestLeadSyncCutShortCarriesItsProgress fills a lead sync's history with
// signals while its activity reads a slow collection: the run cancels the
// activity and continues as new, handing on the sync's key; the next run
// goes on from the position the store recorded with the last page stored
// (in that page's transaction), so the cut reads no page twice. What a cut
// guarantees, checked here: every lead stored once (the store equals the
// simulator), every event counted, each page of the cut sync read once
// (the cut run's pages and the next run's add up to the collection), and
// counters that tell the truth: a later sync starts again from the last
// page read, to pick up leads appended to it, so each one reads that page
// again and counts it (pages = 200 + syncs - 1). No run's history reaches
// 2,000 events.
func TestLeadSyncCutShortCarriesItsProgress(t *testing.T) {
	t.Parallel() // it mostly waits for 200 pages at 200 ms each
	// 200 pages of 10 at 200 ms each: the activity runs for 40 s or more,
	// far longer than the signals take and than it takes to hear of a
	// cancel (heartbeat answers carry it; the worker sends heartbeats at
	// most worker.HeartbeatThrottle apart).
	const leads, pageSize = 2000, 10
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	site := e.site(t, "cut")
	if _, err := e.Sim.CreateLeads(site, leads); err != nil {
		t.Fatal(err)
	}
	if err := e.Sim.SetFaults(simulator.Faults{Latency: simulator.Duration(200 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	id := workflows.LeadSyncID(site)
	run, err := e.Client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflows.LeadSyncWorkflowName,
		workflows.LeadSyncInput{SiteID: site, PageLimit: pageSize, PagesPerRun: 1000, PollInterval: workflows.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	first := run.GetRunID()
	// Signal until the first run's history is past the bound (and a few
	// more, for the workflow task that sees it), or until it has ended:
	// signals after that go to the next run, which counts them as well.
	sent := 0
	for ; ; sent++ {
		if sent%50 == 0 {
			d, err := e.Client.DescribeWorkflow(t.Context(), id, first)
			if err != nil {
				t.Fatal(err)
			}
			info := d.RawResponse.GetWorkflowExecutionInfo()
			if info.GetHistoryLength() > workflows.MaxHistoryEvents+20 || info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
		}
		if err := e.Client.SignalWorkflow(t.Context(), id, "", workflows.SignalLeadsCreated,
			workflows.LeadsCreatedSignal{EventIDs: []string{fmt.Sprintf("evt_cut_%05d", sent)}}); err != nil {
			t.Fatal(err)
		}
	}
	var status enumspb.WorkflowExecutionStatus
	siteopstest.Eventually(t, 2*time.Minute, "the first run to end", func() bool {
		d, err := e.Client.DescribeWorkflow(t.Context(), id, first)
		if err != nil {
			return false
		}
		status = d.RawResponse.GetWorkflowExecutionInfo().GetStatus()
		return status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	})
	var next workflows.LeadSyncInput
	if status != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW || !continuedWith(t, e, id, first, &next) {
		t.Fatalf("the first run ended %s, want continued as new", status)
	}
	p, cut := next.Progress, next.Cut
	if p.Syncs != 0 || p.Pages >= leads/pageSize || p.Leads != p.Pages*pageSize || next.StallSince.IsZero() || cut == nil || cut.Key == "" || cut.Pages != p.Pages {
		t.Fatalf("the first run handed on %+v (cut %+v, stall clock %s); want a sync cut short, its key, and the pages counted of it", p, cut, next.StallSince)
	}
	// The store holds the position of the sync under the key handed on:
	// the next run goes on from there (it may have stored more pages by
	// now).
	pos, err := e.Store.LeadSyncPosition(t.Context(), site, cut.Key)
	if err != nil || pos.Pages == 0 || pos.Pages < cut.Pages {
		t.Fatalf("the store's position of the cut sync: %+v, %v; want at least the %d pages the cut run counted", pos, err, cut.Pages)
	}
	t.Logf("%d signals; the sync was cut after %d of %d pages", sent, cut.Pages, leads/pageSize)
	siteopstest.Eventually(t, 2*time.Minute, "the next run to finish the sync and count every event", func() bool {
		p, err = e.Starter.LeadProgress(t.Context(), site)
		return err == nil && p.CaughtUp && !p.Syncing && p.Events == sent
	})
	assertStoreEqualsSim(t, e, site)
	if want := leads/pageSize + p.Syncs - 1; p.Leads != leads || p.Syncs < 1 || p.Pages != want || p.LeadsRead != p.Pages*pageSize || p.DuplicateEvents != 0 {
		t.Errorf("progress %+v; want %d leads, and %d pages (the collection once, and its last page again for each of the %d later syncs), %d records each",
			p, leads, want, p.Syncs-1, pageSize)
	}
	// The pages the API served: those counted, and at most the one page
	// the cut caught between its answer and its transaction (fetched, not
	// stored, so read again by the next run). A next run that read again
	// pages the cut sync had stored would show here, whatever it counted.
	lists := 0
	for _, r := range e.Sim.Requests() {
		if r.Method == http.MethodGet && r.Path == "/api/v1/sites/"+site+"/leads" && r.Status == http.StatusOK {
			lists++
		}
	}
	if lists < p.Pages || lists > p.Pages+1 {
		t.Errorf("the API served %d pages of leads; want the %d counted, or one more caught by the cut", lists, p.Pages)
	}
	if runs := leadSyncRuns(t, e, site); slices.Max(runs) >= 2000 {
		t.Errorf("history lengths %v; want each under 2,000", runs)
	}
	_ = e.Client.CancelWorkflow(t.Context(), id, "")
	recordRunHistory(t, e, id, first, "lead_sync_cut_short")
}

// continuedWith reads the input a run continued as new with; false when
// it did not.
func continuedWith(t *testing.T, e *env, workflowID, runID string, next any) bool {
	t.Helper()
	it := e.Client.GetWorkflowHistory(t.Context(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), next); err != nil {
				t.Fatal(err)
			}
			return true
		}
	}
	return false
}
