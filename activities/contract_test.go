package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestBrokenContractFailsAtTheFirstAttempt runs activities against the
// simulator's broken_answer fault (a 200 {"data":{}} where the contract
// promises a site id, a publish status or a list of endpoints) under the
// workflows' API retry policy of 12 attempts: each fails once, as a
// non-retryable ContractViolation, and the simulator sees one request. (A
// created endpoint without its secret is agentsite's
// TestTwoHundredsThatBreakTheContract.)
func TestBrokenContractFailsAtTheFirstAttempt(t *testing.T) {
	sim, api, site := simSite(t, 0)
	if err := sim.SetFaults(simulator.Faults{BrokenAnswerRate: 1}); err != nil {
		t.Fatal(err)
	}
	acts := New(Options{API: api, Store: storetest.Open(t, store.SQLite), Now: time.Now})

	tests := []struct {
		activity string
		in       any
		path     string
	}{
		{"CreateSite", CreateSiteInput{IdempotencyKey: "wf/create-site", WorkflowID: "wf", Site: agentsite.NewSite{Title: "B", Slug: "b", Type: "business", Template: "minimal"}}, "/api/v1/sites"},
		{"Publish", PublishInput{IdempotencyKey: "wf/publish", SiteID: site, Published: true}, "/api/v1/sites/" + site + "/publish"},
		{"FindEndpoint", FindEndpointInput{EndpointID: "we_1"}, "/api/v1/webhook-endpoints"},
	}
	for _, tc := range tests {
		t.Run(tc.activity, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivity(acts)
			attempts := 0
			env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { attempts++ })
			env.ExecuteWorkflow(func(ctx workflow.Context) error {
				// The retry policy of every API call in package workflows.
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
					StartToCloseTimeout: 20 * time.Second,
					RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 12},
				})
				return workflow.ExecuteActivity(ctx, tc.activity, tc.in).Get(ctx, nil)
			})
			err := env.GetWorkflowError()
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != ErrTypeContract || !app.NonRetryable() {
				t.Fatalf("error = %v; want a non-retryable %s", err, ErrTypeContract)
			}
			if !strings.Contains(app.Message(), "breaks the API contract") {
				t.Errorf("message = %q, want it to say the answer breaks the API contract", app.Message())
			}
			if attempts != 1 {
				t.Errorf("the activity ran %d attempts, want 1", attempts)
			}
			sent := 0
			for _, rec := range sim.Requests() {
				if rec.Path == tc.path && rec.Fault != "" {
					sent++
				}
			}
			if sent != 1 {
				t.Errorf("the simulator answered %d requests to %s with the fault, want 1", sent, tc.path)
			}
		})
	}
}
