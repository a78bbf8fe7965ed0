package e2e

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestLeadSweepFindsALeadWhoseDeliveryNeverCame: a lead sync started
// without a poll interval arms no timer; a lead whose lead.created
// delivery never comes (the site has no endpoint) reaches the store
// through the worker's lead sweep schedule within a period of it, and the
// sweep asked that site's lead sync, and only it, to sync.
func TestLeadSweepFindsALeadWhoseDeliveryNeverCame(t *testing.T) {
	const every = 5 * time.Second
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.StartWorker(t, testenv.WorkerOptions{LeadSweepEvery: every})
	api, _ := agentsite.NewClient(e.SimURL, apiKey)
	cs, err := api.CreateSite(t.Context(), "sweep-site", agentsite.NewSite{Title: "Sweep", Slug: "sweep", Type: "business", Template: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	site := cs.Site.ID
	if _, err := e.Sim.CreateLeads(site, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Starter.SyncLeads(t.Context(), site, false); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, time.Minute, "the first sync to catch up", func() bool {
		p, err := e.Starter.LeadProgress(t.Context(), site)
		return err == nil && p.CaughtUp && !p.Syncing && p.Leads == 20
	})

	// New leads, and no lead.created delivery for them.
	if _, err := e.Sim.CreateLeads(site, 5); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	siteopstest.Eventually(t, 6*every+30*time.Second, "the sweep to find the leads", func() bool {
		n, _ := e.Store.CountLeads(t.Context(), site)
		return n == 25
	})
	t.Logf("the missed leads were stored %s after they were added (sweep every %s)", time.Since(added).Round(time.Millisecond), every)
	assertStoreEqualsSim(t, e, site)
	// The activity stores the leads before the workflow hears it ended:
	// the progress counts the sync once the workflow has.
	var p workflows.LeadSyncProgress
	siteopstest.Eventually(t, 30*time.Second, "the lead sync to count the sweep's sync", func() bool {
		var err error
		p, err = e.Starter.LeadProgress(t.Context(), site)
		return err == nil && !p.Syncing && p.Syncs >= 2
	})
	if p.Events != 0 || p.Syncs != 2 {
		t.Errorf("lead sync progress = %+v; want 2 syncs and no event (the sweep's sync request)", p)
	}

	// The lead sync armed no timer: the sweep, not a poll, found them.
	if err := e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), ""); err != nil {
		t.Fatal(err)
	}
	_ = e.Client.GetWorkflow(t.Context(), workflows.LeadSyncID(site), "").Get(t.Context(), nil)
	it := e.Client.GetWorkflowHistory(t.Context(), workflows.LeadSyncID(site), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			t.Errorf("the lead sync started a timer (event %d); a site without poll_interval relies on the sweep", ev.GetEventId())
		}
	}
	recordHistory(t, e, workflows.LeadSyncID(site), "lead_sync_swept")

	// A sweep run that signalled the site.
	desc, err := e.Client.ScheduleClient().GetHandle(t.Context(), workflows.LeadSweepScheduleID).Describe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range desc.Info.RecentActions {
		var st workflows.LeadSweepStatus
		run := e.Client.GetWorkflow(t.Context(), a.StartWorkflowResult.WorkflowID, a.StartWorkflowResult.FirstExecutionRunID)
		if err := run.Get(t.Context(), &st); err != nil {
			t.Errorf("sweep %s: %v", a.StartWorkflowResult.WorkflowID, err)
			continue
		}
		if st.Signalled > 0 && !found {
			found = true
			if st.Missed != 1 || st.NotRunning != 0 {
				t.Errorf("the sweep that signalled: %+v; want one site missed and signalled", st)
			}
			recordRunHistory(t, e, a.StartWorkflowResult.WorkflowID, a.StartWorkflowResult.FirstExecutionRunID, "lead_sweep")
		}
	}
	if !found {
		t.Errorf("none of the schedule's %d recent sweeps signalled the site", len(desc.Info.RecentActions))
	}
}
