package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

func appErrType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

func TestOnboardingPublishes(t *testing.T) {
	f := newFixture(t)
	f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, f.input(t, "acme"))
	if !f.env.IsWorkflowCompleted() || f.env.GetWorkflowError() != nil {
		t.Fatalf("workflow error: %v", f.env.GetWorkflowError())
	}
	var res workflows.OnboardingResult
	if err := f.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.SiteID != "site_1" || res.Status != "published" || len(res.KnowledgeIDs) != 2 || len(res.FAQIDs) != 2 || res.KnowledgeIDs[0] == "" || res.FAQIDs[1] == "" {
		t.Errorf("result = %+v", res)
	}
	// One call per step, each with its own key.
	keys := map[string]bool{}
	for _, want := range []struct {
		method, suffix string
		n              int
	}{{"POST", "/sites", 1}, {"PATCH", "/agent", 1}, {"POST", "/knowledge", 2}, {"POST", "/faqs", 2}, {"POST", "/publish", 1}} {
		reqs := f.requests(want.method, want.suffix)
		if len(reqs) != want.n {
			t.Errorf("%s %s: %d requests, want %d", want.method, want.suffix, len(reqs), want.n)
		}
		for _, r := range reqs {
			if keys[r.IdempotencyKey] || !strings.HasPrefix(r.IdempotencyKey, "default-test-workflow-id/") {
				t.Errorf("key %q reused or not derived from the workflow ID", r.IdempotencyKey)
			}
			keys[r.IdempotencyKey] = true
		}
	}
	if wf, err := f.store.SiteWorkflow(t.Context(), res.SiteID); err != nil || wf != "default-test-workflow-id" {
		t.Errorf("site → workflow = %q, %v", wf, err)
	}
}

func TestOnboardingRefusesAnInvalidSpecBeforeAnyCall(t *testing.T) {
	f := newFixture(t)
	in := f.input(t, "acme")
	in.Site.Title = ""
	in.Agent.AllowedOrigins = []string{"https://acme.example/", "https://*.acme.example"}
	in.Knowledge[1].Chars = 3
	f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
	err := f.env.GetWorkflowError()
	if appErrType(err) != workflows.ErrTypeInvalidSpec {
		t.Fatalf("error = %v, want %s", err, workflows.ErrTypeInvalidSpec)
	}
	for _, want := range []string{"site.title", "agent.allowed_origins[0]", "agent.allowed_origins[1]", "knowledge[1].text", "4 rule(s)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if n := len(f.sim.Requests()); n != 0 {
		t.Errorf("%d API requests were made", n)
	}
}

func TestOnboardingActivityFailures(t *testing.T) {
	tests := []struct {
		name     string
		scopes   []string
		prepare  func(t *testing.T, f *fixture)
		wantType string
		// the last request the workflow made, as method and path suffix,
		// where the order is fixed
		lastMethod, lastSuffix string
	}{
		{
			name: "slug already taken fails create-site",
			prepare: func(t *testing.T, f *fixture) {
				if _, err := f.api.CreateSite(t.Context(), "someone-else", f.input(t, "acme").Site); err != nil {
					t.Fatal(err)
				}
			},
			wantType: activities.ErrTypeConflict, lastMethod: "POST", lastSuffix: "/sites",
		},
		{
			name:     "a key without agents:write fails configure-agent",
			scopes:   []string{simulator.ScopeSitesWrite, simulator.ScopeKnowledgeWrite},
			wantType: activities.ErrTypeForbidden, lastMethod: "PATCH", lastSuffix: "/agent",
		},
		{
			name:     "a key without knowledge:write fails the content step",
			scopes:   []string{simulator.ScopeSitesWrite, simulator.ScopeAgentsWrite},
			wantType: activities.ErrTypeForbidden,
		},
		{
			name:     "a missing knowledge text fails add-knowledge",
			prepare:  func(t *testing.T, f *fixture) {},
			wantType: activities.ErrTypeMissingText,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.scopes...)
			in := f.input(t, "acme")
			if tc.prepare != nil {
				tc.prepare(t, f)
			}
			if tc.wantType == activities.ErrTypeMissingText {
				in.Knowledge[0].TextHash = strings.Repeat("0", 64)
			}
			before := len(f.sim.Requests())
			f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
			err := f.env.GetWorkflowError()
			if got := appErrType(errors.Unwrap(err)); got != tc.wantType && appErrType(err) != tc.wantType {
				t.Fatalf("error = %v, want type %s", err, tc.wantType)
			}
			if len(f.requests("POST", "/publish")) != 0 {
				t.Errorf("the site was published after a failure")
			}
			reqs := f.sim.Requests()[before:]
			if last := reqs[len(reqs)-1]; tc.lastMethod != "" && (last.Method != tc.lastMethod || !strings.HasSuffix(last.Path, tc.lastSuffix)) {
				t.Errorf("last request %s %s, want %s …%s", last.Method, last.Path, tc.lastMethod, tc.lastSuffix)
			}
			// Non-retryable: each failing call was made once.
			counts := map[string]int{}
			for _, r := range reqs {
				counts[r.IdempotencyKey]++
				if counts[r.IdempotencyKey] > 1 {
					t.Errorf("%s %s was retried", r.Method, r.Path)
				}
			}
		})
	}
}

func TestOnboardingHonoursRetryAfter(t *testing.T) {
	f := newFixture(t)
	if err := f.sim.SetFaults(simulator.Faults{RateLimitRate: 1, RetryAfter: simulator.Duration(7 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name != "CreateSite" {
			return
		}
		starts = append(starts, f.env.Now())
		if info.Attempt == 2 {
			_ = f.sim.SetFaults(simulator.Faults{}) // the limit lifts
		}
	})
	f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, f.input(t, "acme"))
	if err := f.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(starts) != 2 {
		t.Fatalf("CreateSite ran %d times, want 2", len(starts))
	}
	// The policy would retry after 1 s; Retry-After said 7 s.
	if gap := starts[1].Sub(starts[0]); gap < 7*time.Second || gap > 8*time.Second {
		t.Errorf("second attempt came %s after the first, want the 7 s of Retry-After", gap)
	}
	if n := len(f.requests("POST", "/sites")); n != 2 {
		t.Errorf("%d create requests, want 2", n)
	}
	keys := f.requests("POST", "/sites")
	if keys[0].IdempotencyKey != keys[1].IdempotencyKey {
		t.Errorf("the retry used another idempotency key")
	}
}

func TestOnboardingPublishFailureIsReported(t *testing.T) {
	f := newFixture(t)
	var a *activities.Activities
	f.env.OnActivity(a.Publish, mock.Anything, mock.Anything).Return(activities.PublishResult{},
		temporal.NewNonRetryableApplicationError("agentsite: 404 site gone", activities.ErrTypeNotFound, nil))
	f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, f.input(t, "acme"))
	if err := f.env.GetWorkflowError(); appErrType(errors.Unwrap(err)) != activities.ErrTypeNotFound && appErrType(err) != activities.ErrTypeNotFound {
		t.Fatalf("error = %v", err)
	}
	var st workflows.OnboardingStatus
	v, err := f.env.QueryWorkflow(workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Get(&st); err != nil || st.Step != workflows.StepFailed || !strings.Contains(st.Error, "site gone") || st.SiteID != "site_1" {
		t.Errorf("status = %+v, %v", st, err)
	}
}

func TestOnboardingWaitsForKnowledge(t *testing.T) {
	t.Run("duplicated, reordered and foreign events", func(t *testing.T) {
		f := newFixture(t)
		in := f.input(t, "acme")
		in.WaitForKnowledge = true
		in.KnowledgeTimeout = workflows.Duration(time.Hour)
		var mid workflows.OnboardingStatus
		signal := func(at time.Duration, event, knowledge string) {
			f.env.RegisterDelayedCallback(func() {
				f.env.SignalWorkflow(workflows.SignalKnowledgeReady, workflows.KnowledgeReadySignal{EventID: event, KnowledgeID: knowledge})
			}, at)
		}
		signal(0, "evt_early", "kn_2")              // before the source even exists
		signal(time.Minute, "evt_early", "kn_2")    // a duplicate delivery
		signal(2*time.Minute, "evt_other", "kn_99") // another site's source
		f.env.RegisterDelayedCallback(func() {
			v, err := f.env.QueryWorkflow(workflows.QueryStatus)
			if err == nil {
				_ = v.Get(&mid)
			}
		}, 3*time.Minute)
		signal(4*time.Minute, "evt_last", "kn_1")
		f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
		if err := f.env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var res workflows.OnboardingResult
		_ = f.env.GetWorkflowResult(&res)
		if res.Status != "published" || res.KnowledgeReady != 2 || res.KnowledgeTimedOut {
			t.Errorf("result = %+v", res)
		}
		if mid.Step != workflows.StepWaitingKnowledge || mid.KnowledgeReady != 1 || mid.KnowledgeTotal != 2 {
			t.Errorf("status while waiting = %+v", mid)
		}
	})
	t.Run("timeout fails and leaves a draft", func(t *testing.T) {
		f := newFixture(t)
		in := f.input(t, "acme")
		in.WaitForKnowledge = true
		in.KnowledgeTimeout = workflows.Duration(30 * time.Minute)
		f.env.RegisterDelayedCallback(func() {
			f.env.SignalWorkflow(workflows.SignalKnowledgeReady, workflows.KnowledgeReadySignal{EventID: "evt_1", KnowledgeID: "kn_1"})
		}, time.Minute)
		f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
		err := f.env.GetWorkflowError()
		if appErrType(err) != workflows.ErrTypeKnowledgeTimeout || !strings.Contains(err.Error(), "1 of 2") {
			t.Fatalf("error = %v", err)
		}
		if len(f.requests("POST", "/publish")) != 0 {
			t.Errorf("published despite the timeout")
		}
	})
	t.Run("timeout may proceed", func(t *testing.T) {
		f := newFixture(t)
		in := f.input(t, "acme")
		in.WaitForKnowledge = true
		in.KnowledgeTimeout = workflows.Duration(time.Minute)
		in.OnKnowledgeTimeout = workflows.TimeoutProceed
		f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
		var res workflows.OnboardingResult
		if err := f.env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.Status != "published" || !res.KnowledgeTimedOut || res.KnowledgeReady != 0 {
			t.Errorf("result = %+v", res)
		}
	})
}

// recordInInbox records verified events in the fixture's inbox as the
// ingress would, without any signal: each is {site_id, knowledge_id} for a
// knowledge.ready, {site_id, status} for a site.* event.
func (f *fixture) recordInInbox(t *testing.T, events ...[3]string) {
	t.Helper()
	for _, ev := range events {
		id, typ, data := ev[0], ev[1], ev[2]
		body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-21T09:00:00.000Z","data":%s}`, id, typ, data)
		rec := store.InboxEvent{EventID: id, EventType: typ, Lane: store.LanePriority, EndpointID: "env", ReceivedAt: time.Now(), Body: []byte(body)}
		if _, err := f.store.RecordEvent(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOnboardingWaitsAreLevelTriggered: no knowledge-ready signal is ever
// sent; the onboarding finds the events in the inbox, before it waits or
// while it waits, and a failing read leaves the signals to do it.
func TestOnboardingWaitsAreLevelTriggered(t *testing.T) {
	ready := [][3]string{
		{"evt_k1", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_1"}`},
		{"evt_k2", "knowledge.ready", `{"site_id":"site_1","knowledge_id":"kn_2"}`},
		{"evt_pub", "site.published", `{"site_id":"site_1","status":"published"}`},
	}
	t.Run("the inbox already holds every event: no wait", func(t *testing.T) {
		f := newFixture(t)
		in := f.input(t, "acme")
		in.WaitForKnowledge, in.KnowledgeTimeout = true, workflows.Duration(time.Hour)
		// The simulator numbers sites and sources from 1: the events
		// delivered, say, to an earlier run of this ID.
		f.recordInInbox(t, ready...)
		timers := 0
		f.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
		start := f.env.Now()
		f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
		var res workflows.OnboardingResult
		if err := f.env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.Status != "published" || res.KnowledgeReady != 2 || res.KnowledgeTimedOut {
			t.Errorf("result = %+v; want published with both sources ready", res)
		}
		if timers != 0 || f.env.Now().Sub(start) > time.Minute {
			t.Errorf("the onboarding started %d timers and took %s of workflow time; want no wait at all", timers, f.env.Now().Sub(start))
		}
		st := queryStatus(t, f)
		if st.LastSiteEvent != "site.published" {
			t.Errorf("status %+v; want the inbox's site.published as the last site event", st)
		}
	})
	t.Run("events recorded while it waits, never signalled", func(t *testing.T) {
		f := newFixture(t)
		in := f.input(t, "acme")
		in.WaitForKnowledge, in.KnowledgeTimeout = true, workflows.Duration(time.Hour)
		f.env.RegisterDelayedCallback(func() { f.recordInInbox(t, ready...) }, 3*time.Minute)
		start := f.env.Now()
		f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
		var res workflows.OnboardingResult
		if err := f.env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.Status != "published" || res.KnowledgeReady != 2 || res.KnowledgeTimedOut {
			t.Errorf("result = %+v; want published with both sources ready", res)
		}
		// Reads come at most a minute apart with a one-hour timeout.
		if took := f.env.Now().Sub(start); took < 3*time.Minute || took > 4*time.Minute+time.Second {
			t.Errorf("the onboarding ended %s after it started; want within a minute of the events' 3 min", took)
		}
	})
	t.Run("a failing inbox read leaves the signal path", func(t *testing.T) {
		f := newFixture(t)
		in := f.input(t, "acme")
		in.WaitForKnowledge, in.KnowledgeTimeout = true, workflows.Duration(time.Hour)
		var a *activities.Activities
		reads := 0
		f.env.OnActivity(a.SiteEvents, mock.Anything, mock.Anything).Return(func(context.Context, activities.SiteEventsInput) (activities.SiteEventsResult, error) {
			reads++
			return activities.SiteEventsResult{}, errors.New("the store is down")
		})
		for i, kn := range []string{"kn_1", "kn_2"} {
			f.env.RegisterDelayedCallback(func() {
				f.env.SignalWorkflow(workflows.SignalKnowledgeReady, workflows.KnowledgeReadySignal{EventID: "evt_" + kn, KnowledgeID: kn})
			}, time.Duration(i+1)*time.Minute)
		}
		f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
		var res workflows.OnboardingResult
		if err := f.env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.Status != "published" || res.KnowledgeReady != 2 || reads == 0 {
			t.Errorf("result = %+v after %d failed reads; want published by the signals, with reads tried", res, reads)
		}
	})
	t.Run("a long wait reads the inbox a bounded number of times", func(t *testing.T) {
		f := newFixture(t)
		in := f.input(t, "acme")
		in.WaitForKnowledge, in.KnowledgeTimeout, in.OnKnowledgeTimeout = true, workflows.Duration(workflows.MaxKnowledgeTimeout), workflows.TimeoutProceed
		f.env.SetTestTimeout(2 * time.Minute)
		reads := 0
		f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			if info.ActivityType.Name == "SiteEvents" {
				reads++
			}
		})
		f.env.ExecuteWorkflow(workflows.OnboardingWorkflowName, in)
		var res workflows.OnboardingResult
		if err := f.env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if !res.KnowledgeTimedOut || res.KnowledgeReady != 0 {
			t.Errorf("result = %+v; want a timeout with no source ready", res)
		}
		// A read before the wait, eleven while the interval doubles from
		// 5 s to a hundredth of the timeout, then one per hundredth.
		if reads < 100 || reads > 112 {
			t.Errorf("%d inbox reads in a %s wait; want 100 to 112", reads, workflows.MaxKnowledgeTimeout)
		}
	})
}

func queryStatus(t *testing.T, f *fixture) workflows.OnboardingStatus {
	t.Helper()
	v, err := f.env.QueryWorkflow(workflows.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.OnboardingStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
