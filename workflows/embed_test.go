package workflows_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/workflows"
)

// update sends an UpdateDecide and records how it ended.
type updateOutcome struct {
	rejected error
	err      error
	status   workflows.EmbedIncidentStatus
	done     bool
}

func (f *fixture) decide(at time.Duration, d workflows.EmbedDecision, out *updateOutcome) {
	f.env.RegisterDelayedCallback(func() {
		f.env.UpdateWorkflow(workflows.UpdateDecide, "", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { out.rejected, out.done = err, true },
			OnComplete: func(v any, err error) {
				out.err, out.done = err, true
				if s, ok := v.(workflows.EmbedIncidentStatus); ok {
					out.status = s
				}
			},
		}, d)
	}, at)
}

func TestEmbedIncidentRestore(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 0)
	var bad, good, again updateOutcome
	f.decide(time.Minute, workflows.EmbedDecision{Action: workflows.DecisionRestore, AllowedOrigins: []string{"https://acme.example/"}, Operator: "bob"}, &bad)
	f.decide(2*time.Minute, workflows.EmbedDecision{Action: workflows.DecisionRestore, AllowedOrigins: []string{"https://www.acme.example"}, Operator: "bob"}, &good)
	var during workflows.EmbedIncidentStatus
	f.env.RegisterDelayedCallback(func() {
		v, _ := f.env.QueryWorkflow(workflows.QueryIncident)
		_ = v.Get(&during)
	}, 30*time.Second)
	f.decide(3*time.Minute, workflows.EmbedDecision{Action: workflows.DecisionClose, Operator: "carol"}, &again)
	f.env.ExecuteWorkflow(workflows.EmbedIncidentWorkflowName, workflows.EmbedIncidentInput{SiteID: site, Operator: "alice", Reason: "origin leak"})

	if err := f.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if bad.rejected == nil || !strings.Contains(bad.rejected.Error(), "allowed_origins[0]") {
		t.Errorf("a bad origin was not refused by the validator: %+v", bad)
	}
	if !good.done || good.err != nil || good.status.State != workflows.IncidentRestored || good.status.DecidedBy != "bob" {
		t.Errorf("restore update = %+v", good)
	}
	if during.State != workflows.IncidentOff || during.Operator != "alice" || during.Reason != "origin leak" {
		t.Errorf("status while open = %+v", during)
	}
	var res workflows.EmbedIncidentStatus
	_ = f.env.GetWorkflowResult(&res)
	if res.State != workflows.IncidentRestored || res.OnAt.Before(res.OffAt) || len(res.Origins) != 1 {
		t.Errorf("result = %+v", res)
	}
	patches := f.requests("PATCH", "/agent")
	if len(patches) != 2 || patches[0].IdempotencyKey == patches[1].IdempotencyKey || patches[0].IdempotencyKey == "" {
		t.Fatalf("PATCHes = %+v, want two with different keys", patches)
	}
	if !strings.HasSuffix(patches[0].IdempotencyKey, "/embed-off") || !strings.HasSuffix(patches[1].IdempotencyKey, "/embed-on") {
		t.Errorf("keys = %q, %q", patches[0].IdempotencyKey, patches[1].IdempotencyKey)
	}
	_ = again // sent after the workflow ended: never delivered
}

func TestEmbedIncidentClose(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 0)
	var withOrigins, closed updateOutcome
	f.decide(time.Minute, workflows.EmbedDecision{Action: workflows.DecisionClose, AllowedOrigins: []string{"https://a.example"}}, &withOrigins)
	f.decide(2*time.Minute, workflows.EmbedDecision{Action: "reopen"}, &updateOutcome{})
	f.decide(3*time.Minute, workflows.EmbedDecision{Action: workflows.DecisionClose, Operator: "dana"}, &closed)
	f.env.ExecuteWorkflow(workflows.EmbedIncidentWorkflowName, workflows.EmbedIncidentInput{SiteID: site, Operator: "alice", Reason: "abuse"})
	if err := f.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if withOrigins.rejected == nil {
		t.Errorf("close with origins was accepted")
	}
	if closed.status.State != workflows.IncidentClosed {
		t.Errorf("close = %+v", closed)
	}
	if patches := f.requests("PATCH", "/agent"); len(patches) != 1 {
		t.Errorf("%d PATCHes, want only the embed-off", len(patches))
	}
}

func TestEmbedIncidentUnknownSiteFails(t *testing.T) {
	f := newFixture(t)
	f.env.ExecuteWorkflow(workflows.EmbedIncidentWorkflowName, workflows.EmbedIncidentInput{SiteID: "site_404", Operator: "alice", Reason: "test"})
	if err := f.env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("error = %v, want the 404", err)
	}
}

func TestEmbedIncidentRestoreFailureReachesTheCaller(t *testing.T) {
	f := newFixture(t)
	site := f.siteWithLeads(t, 0)
	var a *activities.Activities
	f.env.OnActivity(a.SetEmbed, mock.Anything, mock.MatchedBy(func(in activities.SetEmbedInput) bool { return !in.Enabled })).Return(nil)
	f.env.OnActivity(a.SetEmbed, mock.Anything, mock.MatchedBy(func(in activities.SetEmbedInput) bool { return in.Enabled })).
		Return(temporal.NewNonRetryableApplicationError("agentsite: 403 lacks agents:write", activities.ErrTypeForbidden, nil))
	var out updateOutcome
	f.decide(time.Minute, workflows.EmbedDecision{Action: workflows.DecisionRestore, Operator: "bob"}, &out)
	f.env.ExecuteWorkflow(workflows.EmbedIncidentWorkflowName, workflows.EmbedIncidentInput{SiteID: site, Operator: "alice", Reason: "r"})
	if err := f.env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "agents:write") {
		t.Errorf("workflow error = %v", err)
	}
	if !out.done || out.err == nil || !strings.Contains(out.err.Error(), "agents:write") {
		t.Errorf("the update's caller was not told: %+v", out)
	}
}
