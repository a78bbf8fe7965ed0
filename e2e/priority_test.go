package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// TestPlaybooksAreDispatchedAheadOfABacklog shows Temporal's Task Queue
// Priority at work on the dev server (devserver.Dynamic turns it on): a
// backlog of onboardings and lead syncs is queued with no worker polling,
// then an embed incident and a secret rotation are started last. A worker
// with two workflow task slots (the SDK's least) then takes the playbooks'
// first workflow tasks before any other, and the onboardings' before the lead syncs'; a
// worker with one activity slot takes the rotation's first activity task
// before the backlog's, and the onboardings' before the lead syncs'.
func TestPlaybooksAreDispatchedAheadOfABacklog(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	ctx := t.Context()
	const each = 12
	var onboardings, syncs []string
	for i := range each {
		slug := fmt.Sprintf("backlog-%02d", i)
		o, err := e.Starter.Onboard(ctx, prepare(t, "../examples/acme-anvils.yaml", slug))
		if err != nil {
			t.Fatal(err)
		}
		onboardings = append(onboardings, o.WorkflowID)
		site := fmt.Sprintf("site_backlog_%02d", i)
		if _, err := e.Starter.SyncLeads(ctx, site, false); err != nil {
			t.Fatal(err)
		}
		syncs = append(syncs, workflows.LeadSyncID(site))
	}
	// The playbooks come last, each started as the CLI starts it (their
	// class as priority key). EmbedOff waits for the PATCH, which no worker
	// sends yet: it runs beside the test.
	incident := workflows.EmbedIncidentID("site_incident")
	go func() { _, _ = e.Starter.EmbedOff(ctx, "site_incident", "on-call", "priority test") }()
	siteopstest.EventuallyNil(t, 10*time.Second, "the incident started", func() error {
		_, err := e.Client.DescribeWorkflow(ctx, incident, "")
		return err
	})
	rot, err := e.Starter.RotateSecret(ctx, starter.RotationRequest{OldEndpointID: "we_priority", NewURL: "http://127.0.0.1:1/webhooks/rotated", Operator: "on-call"})
	if err != nil {
		t.Fatal(err)
	}
	rotation := rot.GetID()

	api, err := agentsite.NewClient(e.SimURL, e.APIKey, agentsite.WithLoopbackReceivers())
	if err != nil {
		t.Fatal(err)
	}
	acts := activities.New(activities.Options{API: api, Store: e.Store, Classes: workflows.ClassOf})
	// Workflow tasks first, two at a time; activities stay in the queue.
	wfw := sdkworker.New(e.Client, e.TaskQueue, sdkworker.Options{
		MaxConcurrentWorkflowTaskExecutionSize: 2, LocalActivityWorkerOnly: true, DisableEagerActivities: true,
	})
	worker.Register(wfw, acts)
	if err := wfw.Start(); err != nil {
		t.Fatal(err)
	}
	defer wfw.Stop()

	all := slices.Concat([]string{incident, rotation}, onboardings, syncs)
	firstTask := firstEvents(t, e, all, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, "first workflow task")
	order := byTime(firstTask)
	t.Logf("first workflow tasks, in the order dispatched: %v", order)
	if rank := min(slices.Index(order, incident), slices.Index(order, rotation)); rank != 0 {
		t.Errorf("a playbook's first workflow task was dispatched %dth, want first: %v", rank, order)
	}
	if i, j := slices.Index(order, incident), slices.Index(order, rotation); max(i, j) > 1 {
		t.Errorf("the playbooks' first workflow tasks were %dth and %dth, want the first two", i, j)
	}
	assertClassesInOrder(t, order, onboardings, syncs, "first workflow tasks")

	// Every backlogged run has scheduled its first activity: now one
	// activity slot takes them.
	backlog := slices.Concat([]string{rotation}, onboardings, syncs)
	firstEvents(t, e, backlog, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, "first activity scheduled")
	aw := sdkworker.New(e.Client, e.TaskQueue, sdkworker.Options{MaxConcurrentActivityExecutionSize: 1})
	aw.RegisterActivity(acts)
	if err := aw.Start(); err != nil {
		t.Fatal(err)
	}
	defer aw.Stop()
	firstAct := firstEvents(t, e, backlog, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, "first activity started")
	aorder := byTime(firstAct)
	t.Logf("first activity tasks, in the order dispatched: %v", aorder)
	if aorder[0] != rotation {
		t.Errorf("the rotation's first activity task was dispatched %dth, want first: %v", slices.Index(aorder, rotation), aorder)
	}
	assertClassesInOrder(t, aorder, onboardings, syncs, "first activity tasks")
}

// assertClassesInOrder checks that every one of first (onboardings) came
// before every one of last (lead syncs) in order.
func assertClassesInOrder(t *testing.T, order, first, last []string, what string) {
	t.Helper()
	lastFirst, firstLast := -1, len(order)
	for i, id := range order {
		if slices.Contains(first, id) {
			lastFirst = i
		}
		if slices.Contains(last, id) && i < firstLast {
			firstLast = i
		}
	}
	if lastFirst > firstLast {
		t.Errorf("%s: a lead sync (%s, %dth) went before an onboarding (%s, %dth): %v", what, order[firstLast], firstLast, order[lastFirst], lastFirst, order)
	}
}

// firstEvents waits until each workflow's history holds an event of type
// typ, and returns the time of its first one by workflow ID.
func firstEvents(t *testing.T, e *env, ids []string, typ enumspb.EventType, what string) map[string]time.Time {
	t.Helper()
	got := map[string]time.Time{}
	siteopstest.EventuallyNil(t, 2*time.Minute, what+" of every run", func() error {
		for _, id := range ids {
			if _, ok := got[id]; ok {
				continue
			}
			it := e.Client.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return err
				}
				if ev.GetEventType() == typ {
					got[id] = ev.GetEventTime().AsTime()
					break
				}
			}
			if _, ok := got[id]; !ok {
				return fmt.Errorf("%s has none yet (%d of %d have)", id, len(got), len(ids))
			}
		}
		return nil
	})
	return got
}

// byTime lists the IDs of at by their time, earliest first.
func byTime(at map[string]time.Time) []string {
	ids := make([]string, 0, len(at))
	for id := range at {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return at[a].Compare(at[b]) })
	return ids
}
