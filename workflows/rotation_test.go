package workflows_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/store"
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
	infos, _, err := f.store.ActiveSecrets(t.Context(), "v2")
	if err != nil || len(infos) != 1 || infos[0].EndpointID != "we_2" || infos[0].Fingerprint != st.NewFingerprint {
		t.Errorf("v2 secrets = %+v, %v", infos, err)
	}
	oldInfos, _, _ := f.store.ActiveSecrets(t.Context(), "v1")
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
	if infos, _, _ := f.store.ActiveSecrets(t.Context(), "v2"); len(infos) != 0 {
		t.Errorf("the new secret is still accepted: %+v", infos)
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
