package workflows_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

const apiKey = "svc_live_workflow_tests"

// fixture is a Temporal test environment whose activities are the real
// ones, calling the simulator over HTTP and writing a real SQLite store.
type fixture struct {
	suite *testsuite.WorkflowTestSuite
	env   *testsuite.TestWorkflowEnvironment
	sim   *simulator.Simulator
	store *store.Store
	acts  *activities.Activities
	api   *agentsite.Client
}

func newFixture(t *testing.T, scopes ...string) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, scopes...)
}

// newFixtureWith is newFixture with the activities' options tuned by tune
// (given the fixture's store) before they are built.
func newFixtureWith(t *testing.T, tune func(st *store.Store, o *activities.Options), scopes ...string) *fixture {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{simulator.ScopeAll}
	}
	sim, err := simulator.New(simulator.Config{
		Keys:           map[string][]string{apiKey: scopes, "svc_live_admin_setup": {simulator.ScopeAll}},
		TimeScale:      1,
		KnowledgeDelay: time.Hour, // readiness comes from the test's signals
		Seed:           1,
		// Endpoints point at a closed loopback port; deliveries fail quietly.
		AllowLoopbackReceivers: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); sim.Close() })
	api, err := agentsite.NewClient(srv.URL, apiKey, agentsite.WithTimeout(5*time.Second), agentsite.WithLoopbackReceivers())
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, store.SQLite)
	o := activities.Options{API: api, Store: st, Receivers: loopback, Classes: workflows.ClassOf}
	if tune != nil {
		tune(st, &o)
	}
	acts := activities.New(o)
	f := &fixture{suite: &testsuite.WorkflowTestSuite{}, sim: sim, store: st, acts: acts, api: api}
	f.env = f.suite.NewTestWorkflowEnvironment()
	f.env.SetTestTimeout(30 * time.Second)
	worker.Register(f.env, acts)
	return f
}

// input returns an onboarding input with two stored knowledge texts and two
// FAQs.
func (f *fixture) input(t *testing.T, slug string) workflows.OnboardingInput {
	t.Helper()
	in := workflows.OnboardingInput{
		Site: agentsite.NewSite{
			Title: "Acme Anvils", Slug: slug, Type: "business", Template: "minimal",
			Content:     agentsite.SiteContent{Headline: "Anvils", Subheadline: "Since 1949", About: "Family-run."},
			PersonaMode: "assistant", Languages: []string{"en"},
		},
		Agent: workflows.AgentSpec{
			DisplayName: "Ava", Instructions: "Answer from the sources.", EmbedEnabled: true,
			AllowedOrigins: []string{"https://acme.example"},
		},
		FAQs: []agentsite.FAQ{{Question: "Do you ship?", Answer: "Worldwide.", Approved: true}, {Question: "Returns?", Answer: "30 days."}},
	}
	for i, text := range []string{strings.Repeat("Anvils are forged. ", 500), "Opening hours: 9 to 5."} {
		hash, err := f.store.PutKnowledgeText(context.Background(), text)
		if err != nil {
			t.Fatal(err)
		}
		in.Knowledge = append(in.Knowledge, workflows.KnowledgeSpec{Name: []string{"Guide", "Hours"}[i], TextHash: hash, Chars: len([]rune(text))})
	}
	return in
}

// requests returns the simulator's requests of one method and path suffix.
func (f *fixture) requests(method, suffix string) []simulator.RequestRecord {
	var out []simulator.RequestRecord
	for _, r := range f.sim.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// loopback lets a test's activities register and rotate webhook
// endpoints at the simulator's loopback receivers (test mode).
var loopback = activities.ReceiverPolicy{AllowLoopback: true}
