package workflows_test

import (
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/workflows"
)

// TestSecretReconcileRetiresSecretsOfDeletedEndpoints deletes endpoints
// behind siteops' back: the reconciliation retires the secret of the one
// deleted outright, leaves the one in a rotation's grace period to retire
// on time, and leaves live endpoints' secrets alone.
func TestSecretReconcileRetiresSecretsOfDeletedEndpoints(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	endpoint := func(key string) string {
		created, err := f.api.CreateWebhookEndpoint(ctx, key, agentsite.NewWebhookEndpoint{URL: "http://127.0.0.1:9/webhooks/v1", Events: []string{"lead.created"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.store.PutSecret(ctx, created.Endpoint.ID, "v1", created.Secret); err != nil {
			t.Fatal(err)
		}
		return created.Endpoint.ID
	}
	live, deleted, grace := endpoint("a"), endpoint("b"), endpoint("c")
	if err := f.store.RetireSecret(ctx, grace, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{deleted, grace} {
		if err := f.api.DeleteWebhookEndpoint(ctx, "delete-"+id, id); err != nil {
			t.Fatal(err)
		}
	}
	f.env.ExecuteWorkflow(workflows.SecretReconcileWorkflowName, workflows.SecretReconcileInput{})
	var st workflows.SecretReconcileStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if !st.Done || st.Checked != 3 || len(st.Retired) != 1 || st.Retired[0] != deleted {
		t.Errorf("status = %+v, want %s retired of 3", st, deleted)
	}
	for id, want := range map[string]string{live: "active", deleted: "retired", grace: "retiring"} {
		if got := f.secretState(t, id); got != want {
			t.Errorf("secret of %s is %s, want %s", id, got, want)
		}
	}
}
