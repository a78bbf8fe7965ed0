package workflows_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// oldEndpoint registers the endpoint to rotate and stores its secret.
func (f *fixture) oldEndpoint(t *testing.T) string {
	t.Helper()
	created, err := f.api.CreateWebhookEndpoint(t.Context(), "old-endpoint", agentsite.NewWebhookEndpoint{
		URL: "http://127.0.0.1:9/webhooks/v1", Events: []string{"lead.created", "knowledge.ready"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutSecret(t.Context(), created.Endpoint.ID, "v1", created.Secret); err != nil {
		t.Fatal(err)
	}
	return created.Endpoint.ID
}

func (f *fixture) endpointIDs(t *testing.T) []string {
	t.Helper()
	eps, err := f.api.ListWebhookEndpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range eps {
		ids = append(ids, e.ID+" "+e.URL+" "+strings.Join(e.Events, ","))
	}
	return ids
}

func rotationInput(old string) workflows.SecretRotationInput {
	return workflows.SecretRotationInput{OldEndpointID: old, NewURL: "http://127.0.0.1:9/webhooks/v2", Receiver: "v2",
		VerifyTimeout: workflows.Duration(10 * time.Minute), GracePeriod: workflows.Duration(time.Hour)}
}

func (f *fixture) decideRotation(at time.Duration, action string, out *updateOutcome) {
	f.env.RegisterDelayedCallback(func() {
		f.env.UpdateWorkflow(workflows.UpdateRotationDecide, "", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { out.rejected, out.done = err, true },
			OnComplete: func(_ any, err error) {
				out.err, out.done = err, true
			},
		}, workflows.RotationDecision{Action: action, Operator: "oncall"})
	}, at)
}

func TestSecretRotationAfterAVerifiedDelivery(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	var early updateOutcome
	f.decideRotation(time.Second, workflows.RotationProceed, &early)
	f.env.RegisterDelayedCallback(func() {
		// Another endpoint's verification changes nothing; the new one's does.
		f.env.SignalWorkflow(workflows.SignalVerifiedDelivery, workflows.VerifiedDeliverySignal{EventID: "evt_a", EndpointID: old})
		f.env.SignalWorkflow(workflows.SignalVerifiedDelivery, workflows.VerifiedDeliverySignal{EventID: "evt_b", EndpointID: "we_2"})
	}, 2*time.Minute)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	var st workflows.SecretRotationStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.RotationDone || st.NewEndpointID != "we_2" || st.VerifiedEventID != "evt_b" || !st.OldSecretStored || len(st.NewFingerprint) != 12 {
		t.Errorf("status = %+v", st)
	}
	if early.rejected == nil {
		t.Errorf("a decision before the timeout was accepted")
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || ids[0] != "we_2 http://127.0.0.1:9/webhooks/v2 lead.created,knowledge.ready" {
		t.Errorf("endpoints after rotation = %v", ids)
	}
	// The new secret is stored for its receiver; the old one retires after the grace period.
	set, err := f.store.ActiveSecrets(t.Context(), "v2")
	infos := set.Infos
	if err != nil || len(infos) != 1 || infos[0].EndpointID != "we_2" || infos[0].Fingerprint != st.NewFingerprint {
		t.Errorf("v2 secrets = %+v, %v", infos, err)
	}
	oldSet, _ := f.store.ActiveSecrets(t.Context(), "v1")
	oldInfos := oldSet.Infos
	if len(oldInfos) != 1 || oldInfos[0].RetireAfter == nil || !oldInfos[0].RetireAfter.Equal(st.OldRetiresAt) {
		t.Errorf("old secret = %+v, want it retiring at %s", oldInfos, st.OldRetiresAt)
	}
	if _, err := f.store.RotationFor(t.Context(), "we_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the rotation mapping was not ended: %v", err)
	}
	// Each step under its own key: create, delete.
	if n := len(f.requests("POST", "/webhook-endpoints")); n != 2 {
		t.Errorf("%d endpoint creations, want 2 (setup and rotation)", n)
	}
	if dels := f.requests("DELETE", "/webhook-endpoints/"+old); len(dels) != 1 || !strings.HasSuffix(dels[0].IdempotencyKey, "/delete-old-endpoint") {
		t.Errorf("deletes = %+v", dels)
	}
}

func TestSecretRotationTimeoutThenAbort(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	var bad, abort updateOutcome
	f.decideRotation(11*time.Minute, "later", &bad)
	f.decideRotation(12*time.Minute, workflows.RotationAbort, &abort)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	var st workflows.SecretRotationStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if bad.rejected == nil || abort.err != nil || !abort.done {
		t.Errorf("bad = %+v, abort = %+v", bad, abort)
	}
	if st.Step != workflows.RotationAborted || st.Decision != workflows.RotationAbort {
		t.Errorf("status = %+v", st)
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || !strings.HasPrefix(ids[0], old+" ") {
		t.Errorf("endpoints after abort = %v, want only the old one", ids)
	}
	if set, _ := f.store.ActiveSecrets(t.Context(), "v2"); len(set.Infos) != 0 {
		t.Errorf("the new secret is still accepted: %+v", set.Infos)
	}
}

func TestSecretRotationTimeoutThenProceed(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	var proceed updateOutcome
	f.decideRotation(15*time.Minute, workflows.RotationProceed, &proceed)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	var st workflows.SecretRotationStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.RotationDone || st.Decision != workflows.RotationProceed || st.DecidedBy != "oncall" || st.VerifiedEventID != "" {
		t.Errorf("status = %+v", st)
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || !strings.HasPrefix(ids[0], "we_2 ") {
		t.Errorf("endpoints = %v", ids)
	}
}

func TestSecretRotationOfAnUnknownEndpointFails(t *testing.T) {
	f := newFixture(t)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput("we_404"))
	if err := f.env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "we_404") {
		t.Errorf("error = %v", err)
	}
	if n := len(f.requests("POST", "/webhook-endpoints")); n != 0 {
		t.Errorf("an endpoint was created")
	}
}

// secretState describes an endpoint's stored secret for assertions:
// active, retiring (scheduled after a grace period), retired, or missing.
func (f *fixture) secretState(t *testing.T, endpointID string) string {
	t.Helper()
	var retireAfter, retiredAt *time.Time
	err := f.store.DB().QueryRowContext(t.Context(), `SELECT retire_after, retired_at FROM webhook_secrets WHERE endpoint_id = $1`, endpointID).Scan(&retireAfter, &retiredAt)
	switch {
	case err != nil:
		return "missing"
	case retiredAt != nil:
		return "retired"
	case retireAfter != nil:
		return "retiring"
	}
	return "active"
}

// TestSecretRotationDecisionTimeoutAborts leaves the decision to nobody:
// after the decision timeout the rotation aborts, the new endpoint is
// deleted and its secret retired, the old one stays fully valid.
func TestSecretRotationDecisionTimeoutAborts(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	in := rotationInput(old)
	in.DecisionTimeout = workflows.Duration(2 * time.Hour)
	var late updateOutcome
	f.decideRotation(10*time.Minute+3*time.Hour, workflows.RotationProceed, &late)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, in)
	var st workflows.SecretRotationStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.RotationAborted || st.Decision != workflows.RotationAbort || st.DecidedBy != workflows.DecidedByTimeout {
		t.Errorf("status = %+v, want aborted by the decision timeout", st)
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || !strings.HasPrefix(ids[0], old+" ") {
		t.Errorf("endpoints = %v, want only the old one", ids)
	}
	if got := f.secretState(t, st.NewEndpointID); got != "retired" {
		t.Errorf("new secret is %s, want retired", got)
	}
	if got := f.secretState(t, old); got != "active" {
		t.Errorf("old secret is %s, want active", got)
	}
}

// TestSecretRotationCleansUpAfterAFailure fails the deletion of the old
// endpoint for good: the rotation fails, and its clean-up deletes the new
// endpoint and retires its secret, leaving the old secret untouched.
func TestSecretRotationCleansUpAfterAFailure(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	var a *activities.Activities
	f.env.OnActivity(a.DeleteEndpoint, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.DeleteEndpointInput) error {
		if in.EndpointID == old {
			return temporal.NewNonRetryableApplicationError("the service refuses", "Forbidden", nil)
		}
		return f.acts.DeleteEndpoint(ctx, in)
	})
	f.env.RegisterDelayedCallback(func() {
		f.env.SignalWorkflow(workflows.SignalVerifiedDelivery, workflows.VerifiedDeliverySignal{EventID: "evt_b", EndpointID: "we_2"})
	}, time.Minute)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	if err := f.env.GetWorkflowError(); err == nil || !strings.Contains(err.Error(), "the service refuses") {
		t.Fatalf("error = %v, want the deletion's", err)
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || !strings.HasPrefix(ids[0], old+" ") {
		t.Errorf("endpoints after the failure = %v, want only the old one", ids)
	}
	if got := f.secretState(t, "we_2"); got != "retired" {
		t.Errorf("new secret is %s, want retired", got)
	}
	if got := f.secretState(t, old); got != "active" {
		t.Errorf("old secret is %s, want active (never half-retired)", got)
	}
	if _, err := f.store.RotationFor(t.Context(), "we_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the rotation mapping was not ended: %v", err)
	}
}

// TestSecretRotationCompletesAfterAFailureOnceTheOldEndpointIsGone fails
// the first EndRotation, after the old endpoint was deleted: the clean-up
// completes the rotation (the old secret retires after the grace period)
// instead of deleting the only endpoint left.
func TestSecretRotationCompletesAfterAFailureOnceTheOldEndpointIsGone(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	var a *activities.Activities
	calls := 0
	f.env.OnActivity(a.EndRotation, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.EndRotationInput) error {
		calls++
		if calls == 1 {
			return temporal.NewNonRetryableApplicationError("store down", "Test", nil)
		}
		return f.acts.EndRotation(ctx, in)
	})
	f.env.RegisterDelayedCallback(func() {
		f.env.SignalWorkflow(workflows.SignalVerifiedDelivery, workflows.VerifiedDeliverySignal{EventID: "evt_b", EndpointID: "we_2"})
	}, time.Minute)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	if err := f.env.GetWorkflowError(); err == nil {
		t.Fatal("the rotation succeeded although an activity failed for good")
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || !strings.HasPrefix(ids[0], "we_2 ") {
		t.Errorf("endpoints = %v, want only the new one", ids)
	}
	if got := f.secretState(t, old); got != "retiring" {
		t.Errorf("old secret is %s, want retiring after the grace period", got)
	}
	if got := f.secretState(t, "we_2"); got != "active" {
		t.Errorf("new secret is %s, want active", got)
	}
}

// TestSecretRotationCleansUpOnCancel cancels a rotation waiting for
// on-call: the clean-up runs although the workflow is cancelled.
func TestSecretRotationCleansUpOnCancel(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	f.env.RegisterDelayedCallback(f.env.CancelWorkflow, 30*time.Minute)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	if err := f.env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("error = %v, want cancelled", err)
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || !strings.HasPrefix(ids[0], old+" ") {
		t.Errorf("endpoints after cancel = %v, want only the old one", ids)
	}
	if got := f.secretState(t, "we_2"); got != "retired" {
		t.Errorf("new secret is %s, want retired", got)
	}
	if got := f.secretState(t, old); got != "active" {
		t.Errorf("old secret is %s, want active", got)
	}
}

// TestSecretRotationReRunReusesItsEndpoint lets a first run time out
// while it waits (no clean-up runs, as after a terminate), then runs the
// same rotation again: it takes over the endpoint the first run created
// instead of creating a third.
func TestSecretRotationReRunReusesItsEndpoint(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	id := workflows.SecretRotationID(old)
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	f.env.SetWorkflowRunTimeout(5 * time.Minute)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	if err := f.env.GetWorkflowError(); err == nil {
		t.Fatal("the first run did not time out")
	}
	if ids := f.endpointIDs(t); len(ids) != 2 {
		t.Fatalf("endpoints after the first run = %v, want the old and the new one", ids)
	}

	env := f.suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	worker.Register(env, f.acts)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalVerifiedDelivery, workflows.VerifiedDeliverySignal{EventID: "evt_c", EndpointID: "we_2"})
	}, time.Minute)
	env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, rotationInput(old))
	var st workflows.SecretRotationStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.RotationDone || st.NewEndpointID != "we_2" || !st.NewEndpointReused {
		t.Errorf("status = %+v, want done on the reused we_2", st)
	}
	if n := len(f.requests("POST", "/webhook-endpoints")); n != 2 {
		t.Errorf("%d endpoint creations, want 2 (setup and the first run)", n)
	}
	if ids := f.endpointIDs(t); len(ids) != 1 || !strings.HasPrefix(ids[0], "we_2 ") {
		t.Errorf("endpoints = %v, want only we_2", ids)
	}
}

// TestSecretRotationAfterAnAbortCreatesAFreshEndpoint aborts a rotation
// and runs it again: the deleted endpoint is not replayed under the old
// key; a new one is created.
func TestSecretRotationAfterAnAbortCreatesAFreshEndpoint(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	id := workflows.SecretRotationID(old)
	in := rotationInput(old)
	in.DecisionTimeout = workflows.Duration(time.Hour)
	f.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, in)
	var st workflows.SecretRotationStatus
	if err := f.env.GetWorkflowResult(&st); err != nil || st.Step != workflows.RotationAborted {
		t.Fatalf("first run = %+v, %v", st, err)
	}
	env := f.suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	worker.Register(env, f.acts)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalVerifiedDelivery, workflows.VerifiedDeliverySignal{EventID: "evt_d", EndpointID: "we_3"})
	}, time.Minute)
	env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, in)
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.RotationDone || st.NewEndpointID != "we_3" || st.NewEndpointReused {
		t.Errorf("second run = %+v, want done on a fresh we_3", st)
	}
}

// TestSecretRotationKeepsAVerifiedDeliveryThatCameEarly signals the new
// endpoint's verified delivery while the rotation is still creating it
// (the service may deliver before CreateEndpoint returns): the rotation
// counts it once it knows the endpoint, and goes on without waiting out
// the verify timeout or on-call.
func TestSecretRotationKeepsAVerifiedDeliveryThatCameEarly(t *testing.T) {
	f := newFixture(t)
	old := f.oldEndpoint(t)
	f.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "CreateEndpoint" {
			f.env.SignalWorkflow(workflows.SignalVerifiedDelivery, workflows.VerifiedDeliverySignal{EventID: "evt_early", EndpointID: "we_2"})
		}
	})
	in := rotationInput(old)
	f.env.ExecuteWorkflow(workflows.SecretRotationWorkflowName, in)
	var st workflows.SecretRotationStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.RotationDone || st.NewEndpointID != "we_2" || st.VerifiedEventID != "evt_early" || st.DecidedBy != "" {
		t.Errorf("status = %+v; want done on the early verified delivery, without a decision", st)
	}
}
