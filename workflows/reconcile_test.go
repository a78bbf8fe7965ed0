package workflows_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// TestSecretReconcileRetiresSecretsOfDeletedEndpoints deletes endpoints
// behind siteops' back: the reconciliation retires the secret of the one
// deleted outright, and of the one whose planned retirement lies a century
// ahead (no rotation may keep a secret past MaxGracePeriod), leaves the one
// in a rotation's grace period to retire on time, and leaves live
// endpoints' secrets alone.
func TestSecretReconcileRetiresSecretsOfDeletedEndpoints(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	live, deleted, grace, century := f.storedEndpoint(t, "a"), f.storedEndpoint(t, "b"), f.storedEndpoint(t, "c"), f.storedEndpoint(t, "d")
	if err := f.store.RetireSecret(ctx, grace, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := f.store.RetireSecret(ctx, century, time.Now().Add(876000*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{deleted, grace, century} {
		if err := f.api.DeleteWebhookEndpoint(ctx, "delete-"+id, id); err != nil {
			t.Fatal(err)
		}
	}
	f.env.ExecuteWorkflow(workflows.SecretReconcileWorkflowName, workflows.SecretReconcileInput{})
	var st workflows.SecretReconcileStatus
	if err := f.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if !st.Done || st.Checked != 4 || !slices.Equal(st.Retired, []string{deleted, century}) {
		t.Errorf("status = %+v, want %s and %s retired of 4", st, deleted, century)
	}
	for id, want := range map[string]string{live: "active", deleted: "retired", grace: "retiring", century: "retired"} {
		if got := f.secretState(t, id); got != want {
			t.Errorf("secret of %s is %s, want %s", id, got, want)
		}
	}
}

// storedEndpoint creates an endpoint through the API and stores its secret,
// as `siteops webhook create` does.
func (f *fixture) storedEndpoint(t *testing.T, key string) string {
	t.Helper()
	created, err := f.api.CreateWebhookEndpoint(t.Context(), key, agentsite.NewWebhookEndpoint{URL: "http://127.0.0.1:9/webhooks/v1", Events: []string{"lead.created"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.PutSecret(t.Context(), created.Endpoint.ID, "v1", created.Secret); err != nil {
		t.Fatal(err)
	}
	return created.Endpoint.ID
}

// reconcileThrough runs SecretReconcile with activities that call api.
func (f *fixture) reconcileThrough(t *testing.T, api activities.API) workflows.SecretReconcileStatus {
	t.Helper()
	env := f.suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	worker.Register(env, activities.New(activities.Options{API: api, Store: f.store, Receivers: loopback, Classes: workflows.ClassOf}))
	env.ExecuteWorkflow(workflows.SecretReconcileWorkflowName, workflows.SecretReconcileInput{})
	var st workflows.SecretReconcileStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// pagedEndpointList serves the simulator's API but answers the endpoint
// list one endpoint a page, with next_cursor, as a paging API would.
func pagedEndpointList(t *testing.T, sim http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/webhook-endpoints" {
			sim.ServeHTTP(w, r)
			return
		}
		whole := httptest.NewRecorder()
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = ""
		sim.ServeHTTP(whole, r2)
		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(whole.Body.Bytes(), &list); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		i, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		i = min(i, len(list.Data))
		page := map[string]any{"data": list.Data[i:min(i+1, len(list.Data))], "next_cursor": nil}
		if i+1 < len(list.Data) {
			page["next_cursor"] = strconv.Itoa(i + 1)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSecretReconcileReadsEveryPageOfTheList pages the endpoint list one
// endpoint at a time: the reconciliation reads every page, so only the
// deleted endpoint's secret is retired, not those of the live endpoints
// past the first page.
func TestSecretReconcileReadsEveryPageOfTheList(t *testing.T) {
	f := newFixture(t)
	a, b, deleted, c := f.storedEndpoint(t, "a"), f.storedEndpoint(t, "b"), f.storedEndpoint(t, "d"), f.storedEndpoint(t, "c")
	if err := f.api.DeleteWebhookEndpoint(t.Context(), "delete-"+deleted, deleted); err != nil {
		t.Fatal(err)
	}
	srv := pagedEndpointList(t, f.sim.Handler())
	api, err := agentsite.NewClient(srv.URL, apiKey, agentsite.WithTimeout(5*time.Second), agentsite.WithLoopbackReceivers())
	if err != nil {
		t.Fatal(err)
	}
	st := f.reconcileThrough(t, api)
	if !slices.Equal(st.Retired, []string{deleted}) || len(st.Withheld) != 0 {
		t.Errorf("status = %+v, want only %s retired", st, deleted)
	}
	for id, want := range map[string]string{a: "active", b: "active", c: "active", deleted: "retired"} {
		if got := f.secretState(t, id); got != want {
			t.Errorf("secret of %s is %s, want %s", id, got, want)
		}
	}
}

// emptyList answers the endpoint list with no endpoint at all, as an API
// key of another account, or a failing API, may.
type emptyList struct{ activities.API }

func (emptyList) ListWebhookEndpoints(context.Context) ([]agentsite.WebhookEndpoint, error) {
	return nil, nil
}

// TestSecretReconcileRetiresNothingOnAListThatNamesNoStoredEndpoint gives
// the reconciliation an empty endpoint list while the stored endpoints all
// exist: it retires none of their secrets and reports them withheld.
func TestSecretReconcileRetiresNothingOnAListThatNamesNoStoredEndpoint(t *testing.T) {
	f := newFixture(t)
	a, b := f.storedEndpoint(t, "a"), f.storedEndpoint(t, "b")
	st := f.reconcileThrough(t, emptyList{f.api})
	if len(st.Retired) != 0 || !slices.Equal(st.Withheld, []string{a, b}) {
		t.Errorf("status = %+v, want nothing retired and %s, %s withheld", st, a, b)
	}
	if lines := st.Summary(); len(lines) != 2 {
		t.Errorf("summary %q does not say the retirements were withheld", lines)
	}
	for _, id := range []string{a, b} {
		if got := f.secretState(t, id); got != "active" {
			t.Errorf("secret of %s is %s after an empty endpoint list, want active", id, got)
		}
	}
}
