package e2e

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// startIngressWith is startIngress with secrets configured for POST
// /webhooks, as SITEOPS_WEBHOOK_SECRETS sets them.
func (e *env) startIngressWith(t *testing.T, envSecrets ...string) *ingressRun {
	t.Helper()
	in := e.StartIngress(t, testenv.IngressOptions{WebhookSecrets: envSecrets})
	return &ingressRun{Ingress: in, url: in.URL}
}

func (e *env) api(t *testing.T) *agentsite.Client {
	t.Helper()
	api, err := agentsite.NewClient(e.SimURL, apiKey, agentsite.WithLoopbackReceivers())
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// endpointOf creates an endpoint directly through the API (as a dashboard
// would) and, when receiver is not nil, stores its secret for *receiver.
// It returns the endpoint id and the secret, which stays in the test.
func (e *env) endpointOf(t *testing.T, url string, receiver *string) (string, string) {
	t.Helper()
	created, err := e.api(t).CreateWebhookEndpoint(t.Context(), "test-"+itoa(int(time.Now().UnixNano()%1e9)), agentsite.NewWebhookEndpoint{URL: url, Events: []string{"lead.created"}})
	if err != nil {
		t.Fatal(err)
	}
	if receiver != nil {
		if err := e.Store.PutSecret(t.Context(), created.Endpoint.ID, *receiver, created.Secret); err != nil {
			t.Fatal(err)
		}
	}
	return created.Endpoint.ID, created.Secret.Reveal()
}

func (e *env) endpointCreations() int {
	n := 0
	for _, r := range e.Sim.Requests() {
		if r.Method == http.MethodPost && r.Path == "/api/v1/webhook-endpoints" {
			n++
		}
	}
	return n
}

func (e *env) rotationStep(t *testing.T, id string) string {
	t.Helper()
	v, err := e.Client.QueryWorkflow(t.Context(), id, "", workflows.QueryRotation)
	if err != nil {
		return ""
	}
	var st workflows.SecretRotationStatus
	if err := v.Get(&st); err != nil {
		return ""
	}
	return st.Step
}

// TestSecretRotationReRunAfterTerminateReusesItsEndpoint terminates a
// rotation while it waits for a verified delivery (no clean-up can run)
// and starts it again: the second run takes over the endpoint the first
// created, so the account never holds a third endpoint.
func TestSecretRotationReRunAfterTerminateReusesItsEndpoint(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	in := e.startIngress(t)
	old := e.register(t, in, "/webhooks/v1", "lead.created")
	id := workflows.SecretRotationID(old)
	req := starter.RotationRequest{OldEndpointID: old, NewURL: in.url + "/webhooks/v2", VerifyTimeout: time.Hour, GracePeriod: time.Hour}
	if _, err := e.Starter.RotateSecret(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the first run to wait for a verified delivery", func() bool {
		return e.rotationStep(t, id) == workflows.RotationVerifying
	})
	if err := e.Client.TerminateWorkflow(t.Context(), id, "", "operator terminated it"); err != nil {
		t.Fatal(err)
	}
	if n := e.endpointCreations(); n != 2 {
		t.Fatalf("%d endpoint creations before the re-run, want 2 (the old endpoint and the first run's)", n)
	}
	run, err := e.Starter.RotateSecret(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the re-run to wait for a verified delivery", func() bool {
		return e.rotationStep(t, id) == workflows.RotationVerifying
	})
	site := e.site(t, "rerun")
	if _, err := e.Sim.CreateLeads(site, 1); err != nil {
		t.Fatal(err)
	}
	var st workflows.SecretRotationStatus
	if err := e.Starter.Wait(ctxWithin(t, time.Minute), run, &st); err != nil {
		t.Fatal(err)
	}
	if st.Step != workflows.RotationDone || !st.NewEndpointReused || st.VerifiedEventID == "" {
		t.Errorf("re-run = %+v, want done on the reused endpoint", st)
	}
	if n := e.endpointCreations(); n != 2 {
		t.Errorf("%d endpoint creations, want 2: the re-run created another endpoint", n)
	}
	eps := e.endpoints(t)
	if len(eps) != 1 || eps[0].ID != st.NewEndpointID {
		t.Errorf("endpoints after the re-run = %+v, want only %s", eps, st.NewEndpointID)
	}
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}

// TestSecretRetireCommand retires stored secrets by endpoint id (now) and
// by fingerprint (later) with `siteops secret retire`, and refuses, naming
// the variable, a secret that is not stored. A dry run says which secret
// would retire and when, first that nothing changed; without --yes, where
// it cannot ask, it refuses naming --yes; neither changes the secret.
func TestSecretRetireCommand(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	in := e.startIngressWith(t)
	v1 := "v1"
	a, secretA := e.endpointOf(t, in.url+"/webhooks/v1", &v1)
	b, secretB := e.endpointOf(t, in.url+"/webhooks/v1", &v1)
	if code := deliver(t, in.url, "/webhooks/v1", "evt_a_1", secretA); code != http.StatusOK {
		t.Fatalf("a delivery signed with a's secret = %d, want 200", code)
	}
	keyEnv := []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}

	out, code := e.run(t, keyEnv, "secret", "retire", "--endpoint", a, "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "nothing changed (dry run); siteops secret retire would retire the secret of endpoint "+a) || !strings.Contains(out, "cannot be undone") {
		t.Errorf("secret retire --dry-run: exit %d\n%s", code, out)
	}
	out, code = e.run(t, keyEnv, "secret", "retire", "--endpoint", a)
	if code != 2 || !strings.Contains(out, "add --yes") || !strings.Contains(out, "nothing changed") {
		t.Errorf("secret retire without --yes in a pipe: exit %d, want 2 naming --yes\n%s", code, out)
	}
	var unchanged *time.Time
	if err := e.Store.DB().QueryRowContext(t.Context(), `SELECT retired_at FROM webhook_secrets WHERE endpoint_id = $1`, a).Scan(&unchanged); err != nil || unchanged != nil {
		t.Errorf("after a dry run and a refusal, retired_at of %s = %v, %v; want none", a, unchanged, err)
	}
	out, code = e.run(t, keyEnv, "secret", "retire", "--endpoint", a, "--yes")
	if code != 0 || !strings.Contains(out, "secret of endpoint "+a) || !strings.Contains(out, "retired at") {
		t.Fatalf("secret retire --endpoint: exit %d\n%s", code, out)
	}
	siteopstest.Eventually(t, 5*time.Second, "a's secret to be refused", func() bool {
		return deliver(t, in.url, "/webhooks/v1", "evt_a_"+itoa(int(time.Now().UnixNano()%1e9)), secretA) == http.StatusUnauthorized
	})
	var retiredAt *time.Time
	if err := e.Store.DB().QueryRowContext(t.Context(), `SELECT retired_at FROM webhook_secrets WHERE endpoint_id = $1`, a).Scan(&retiredAt); err != nil || retiredAt == nil {
		t.Errorf("retired_at of %s = %v, %v; want it written", a, retiredAt, err)
	}

	apiEnv := append(keyEnv, "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_ALLOW_LOOPBACK_RECEIVERS=true")
	if out, code := e.run(t, apiEnv, "webhook", "list"); code != 0 || !strings.Contains(out, "secret RETIRED") {
		t.Errorf("webhook list does not show the retired secret: exit %d\n%s", code, out)
	}

	fp := agentsite.NewSigningSecret(secretB).Fingerprint()
	out, code = e.run(t, keyEnv, "secret", "retire", "--fingerprint", fp, "--at", "1h", "--yes")
	if code != 0 || !strings.Contains(out, "secret of endpoint "+b) || !strings.Contains(out, "retires at") {
		t.Fatalf("secret retire --fingerprint --at 1h: exit %d\n%s", code, out)
	}
	if code := deliver(t, in.url, "/webhooks/v1", "evt_b_1", secretB); code != http.StatusOK {
		t.Errorf("b's secret, retiring in an hour, answered %d; want 200 until then", code)
	}

	out, code = e.run(t, keyEnv, "secret", "retire", "--endpoint", "we_not_stored")
	if code != 3 || !strings.Contains(out, "SITEOPS_WEBHOOK_SECRETS") {
		t.Errorf("retiring a secret that is not stored: exit %d\n%s", code, out)
	}
	out, code = e.run(t, keyEnv, "secret", "retire")
	if code != 2 {
		t.Errorf("retire without a name: exit %d\n%s", code, out)
	}
}

// TestDeletedEndpointSecretRefusedWithinOneReconcilePeriod deletes an
// endpoint through the API, as a dashboard would: the worker's scheduled
// reconciliation retires its stored secret, and the ingress refuses it
// within one period. Another endpoint's secret and the configured
// SITEOPS_WEBHOOK_SECRETS stay accepted.
func TestDeletedEndpointSecretRefusedWithinOneReconcilePeriod(t *testing.T) {
	const period = 2 * time.Second
	e := newEnv(t, store.Postgres, simulator.Config{})
	const envSecret = "whsec_configured_for_default" //nolint:gosec // made up for the test
	in := e.startIngressWith(t, envSecret)
	v1 := "v1"
	gone, goneSecret := e.endpointOf(t, in.url+"/webhooks/v1", &v1)
	_, keptSecret := e.endpointOf(t, in.url+"/webhooks/v1", &v1)
	e.StartWorker(t, testenv.WorkerOptions{SecretReconcileEvery: period})
	// A second worker starting finds the schedule and leaves it as it is.
	e.StartWorker(t, testenv.WorkerOptions{SecretReconcileEvery: period})
	siteopstest.Eventually(t, 10*time.Second, "the schedule to exist", func() bool {
		d, err := e.Client.ScheduleClient().GetHandle(t.Context(), workflows.SecretReconcileScheduleID).Describe(t.Context())
		return err == nil && len(d.Schedule.Spec.Intervals) == 1 && d.Schedule.Spec.Intervals[0].Every == period
	})
	if code := deliver(t, in.url, "/webhooks/v1", "evt_gone_1", goneSecret); code != http.StatusOK {
		t.Fatalf("before the deletion: %d, want 200", code)
	}
	if err := e.api(t).DeleteWebhookEndpoint(t.Context(), "dashboard-delete", gone); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	n := 0
	siteopstest.Eventually(t, 3*period, "the deleted endpoint's secret to be refused", func() bool {
		n++
		return deliver(t, in.url, "/webhooks/v1", "evt_gone_"+itoa(n+1), goneSecret) == http.StatusUnauthorized
	})
	// One period, plus the reconciliation's own run and the ingress's
	// secret refresh (200 ms here).
	if took := time.Since(deleted); took > period+siteopstest.Bound(1500*time.Millisecond) {
		t.Errorf("the deleted endpoint's secret was refused %s after the deletion; want within one period (%s) and a margin", took, period)
	}
	t.Logf("deleted endpoint's secret refused %s after the deletion (period %s)", time.Since(deleted).Round(time.Millisecond), period)
	if code := deliver(t, in.url, "/webhooks/v1", "evt_kept_1", keptSecret); code != http.StatusOK {
		t.Errorf("a live endpoint's secret answered %d, want 200", code)
	}
	if code := deliver(t, in.url, "/webhooks", "evt_env_1", envSecret); code != http.StatusOK {
		t.Errorf("the configured secret answered %d, want 200", code)
	}
	var retiredAt *time.Time
	if err := e.Store.DB().QueryRowContext(t.Context(), `SELECT retired_at FROM webhook_secrets WHERE endpoint_id = $1`, gone).Scan(&retiredAt); err != nil || retiredAt == nil {
		t.Errorf("retired_at of the deleted endpoint = %v, %v", retiredAt, err)
	}
	// The schedule is the one the worker made: the reconciliation runs.
	h := e.Client.ScheduleClient().GetHandle(t.Context(), workflows.SecretReconcileScheduleID)
	d, err := h.Describe(t.Context())
	if err != nil || d.Info.NumActions == 0 {
		t.Fatalf("schedule %s: %+v, %v", workflows.SecretReconcileScheduleID, d, err)
	}
	if len(d.Info.RecentActions) == 0 {
		t.Fatalf("schedule %s lists no recent action", workflows.SecretReconcileScheduleID)
	}
	// siteops status reads a reconciliation by the ID its schedule gave it.
	id := d.Info.RecentActions[0].StartWorkflowResult.WorkflowID
	_ = e.Client.GetWorkflow(t.Context(), id, "").Get(t.Context(), nil)
	if out, code := e.run(t, nil, "status", id); code != 0 || !strings.Contains(out, "Completed") || !strings.Contains(out, "stored secret(s)") {
		t.Errorf("status of a reconciliation: exit %d\n%s", code, out)
	}
	if os.Getenv(recordEnv) != "" {
		recordHistory(t, e, id, "secret_reconcile")
	}
	// A worker started with another period brings the schedule to it;
	// the same period again changes nothing.
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, every := range []time.Duration{time.Hour, time.Hour} {
		if err := worker.EnsureSecretReconcileSchedule(t.Context(), e.Client, taskQueue, every, logger); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := h.Describe(t.Context()); err != nil || len(d.Schedule.Spec.Intervals) != 1 || d.Schedule.Spec.Intervals[0].Every != time.Hour {
		t.Errorf("schedule after a worker with a 1h period: %+v, %v", d, err)
	}
}

// TestRotateOutputIsTruthfulForAConfiguredSecret rotates an endpoint whose
// secret comes from SITEOPS_WEBHOOK_SECRETS (not stored): the CLI does not
// claim the old secret retires; it says to remove it from the variable.
func TestRotateOutputIsTruthfulForAConfiguredSecret(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	oldID, oldSecret := e.endpointOf(t, "http://127.0.0.1:9/webhooks", nil)
	in := e.startIngressWith(t, oldSecret)
	site := e.site(t, "truthful")
	done := make(chan struct{})
	go func() {
		// Events keep coming until the rotation's new endpoint verifies.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for range 300 {
			select {
			case <-done:
				return
			case <-tick.C:
				_, _ = e.Sim.CreateLeads(site, 1)
			}
		}
	}()
	out, code := e.run(t, []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}, "secret", "rotate", "--endpoint", oldID, "--url", in.url+"/webhooks/v2", "--wait", "--grace", "1m")
	close(done)
	if code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("secret rotate --wait: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "retires at") || !strings.Contains(out, "SITEOPS_WEBHOOK_SECRETS") {
		t.Errorf("the CLI is not truthful about a configured secret:\n%s", out)
	}
	if strings.Contains(out, oldSecret) {
		t.Errorf("the CLI printed a secret")
	}
	out, code = e.run(t, nil, "status", workflows.SecretRotationID(oldID))
	if code != 0 || strings.Contains(out, "retires at") {
		t.Errorf("status of the rotation: exit %d\n%s", code, out)
	}
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}

// TestRotationDecisionsSayWhatBecomesOfTheOldSecret decides rotations that
// saw no verified delivery. After an abort the status (and the abort's
// answer) says the old secret is stored and stays accepted, and names no
// retirement time, for there is none. After proceed, the command says when
// the old secret stops being accepted, in text and in JSON.
func TestRotationDecisionsSayWhatBecomesOfTheOldSecret(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	keyEnv := []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}
	v1 := "v1"
	// rotateUntilDeciding starts a rotation of a new endpoint whose secret
	// is stored, with --wait, which ends when the rotation asks for a
	// decision: nothing delivers to its URLs, so no delivery verifies.
	rotateUntilDeciding := func(t *testing.T) string {
		t.Helper()
		old, _ := e.endpointOf(t, "http://127.0.0.1:9/webhooks/v1", &v1)
		id := workflows.SecretRotationID(old)
		out, code := e.run(t, keyEnv, "secret", "rotate", "--endpoint", old, "--url", "http://127.0.0.1:9/webhooks/v2", "--verify-timeout", "1s", "--grace", "1h", "--wait")
		want := []string{id + " waits for your decision", "'siteops secret proceed --endpoint " + old + "'", "'siteops secret abort --endpoint " + old + "'"}
		for _, w := range want {
			if code != 1 || !strings.Contains(out, w) {
				t.Fatalf("secret rotate --wait of a rotation that asks for a decision: exit %d\n%s\nwant exit 1 and %q", code, out, w)
			}
		}
		if step := e.rotationStep(t, id); step != workflows.RotationDeciding {
			t.Fatalf("after secret rotate --wait ended, the rotation is at %q, want %q", step, workflows.RotationDeciding)
		}
		return old
	}
	// keys decodes a JSON object's top-level fields.
	keys := func(t *testing.T, doc string) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("not a JSON object (%v):\n%s", err, doc)
		}
		return m
	}

	t.Run("abort", func(t *testing.T) {
		old := rotateUntilDeciding(t)
		stdout, stderr, code := e.runSplit(t, keyEnv, "", "secret", "abort", "--endpoint", old, "--yes", "-o", "json")
		if code != 0 {
			t.Fatalf("secret abort: exit %d\n%s%s", code, stdout, stderr)
		}
		st := keys(t, stdout)
		if string(st["step"]) != `"aborted"` || string(st["old_secret_stored"]) != "true" {
			t.Errorf("secret abort -o json: step %s, old_secret_stored %s; want \"aborted\" and true (the old secret is stored and stays)\n%s", st["step"], st["old_secret_stored"], stdout)
		}
		if at, ok := st["old_retires_at"]; ok {
			t.Errorf("secret abort -o json names old_retires_at %s, a retirement that does not exist", at)
		}
		stdout, stderr, code = e.runSplit(t, nil, "", "status", workflows.SecretRotationID(old), "-o", "json")
		var status struct {
			Detail map[string]json.RawMessage `json:"detail"`
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(stdout), &status); code != 0 || err != nil {
			t.Fatalf("status -o json: exit %d (%v)\n%s%s", code, err, stdout, stderr)
		}
		for name, doc := range map[string]map[string]json.RawMessage{"detail": status.Detail, "result": status.Result} {
			if string(doc["old_secret_stored"]) != "true" || doc["old_retires_at"] != nil {
				t.Errorf("status -o json %s: old_secret_stored %s, old_retires_at %s; want true and none\n%s", name, doc["old_secret_stored"], doc["old_retires_at"], stdout)
			}
		}
		out, code := e.run(t, nil, "status", workflows.SecretRotationID(old))
		if code != 0 || !strings.Contains(out, "old endpoint "+old+" and its secret stay as they were") || strings.Contains(out, "retires at") {
			t.Errorf("status of the aborted rotation: exit %d\n%s", code, out)
		}
	})

	t.Run("proceed", func(t *testing.T) {
		old := rotateUntilDeciding(t)
		began := time.Now()
		// Without --yes, where it cannot ask, it refuses and sends nothing.
		if out, code := e.run(t, keyEnv, "secret", "proceed", "--endpoint", old); code != 2 || !strings.Contains(out, "add --yes") {
			t.Errorf("secret proceed without --yes in a pipe: exit %d, want 2 naming --yes\n%s", code, out)
		}
		if step := e.rotationStep(t, workflows.SecretRotationID(old)); step != workflows.RotationDeciding {
			t.Fatalf("a refused proceed moved the rotation to %q", step)
		}
		out, stderr, code := e.runSplit(t, keyEnv, "", "secret", "proceed", "--endpoint", old, "--yes")
		if code != 0 || !strings.Contains(out, "old endpoint "+old+" deleted, its secret retires at ") {
			t.Fatalf("secret proceed does not say when the old secret stops being accepted: exit %d\n%s%s", code, out, stderr)
		}
		at, err := time.Parse(time.RFC3339, strings.TrimSpace(out[strings.LastIndex(out, " ")+1:]))
		if err != nil || at.Before(began.Add(time.Hour-time.Minute)) || at.After(time.Now().Add(time.Hour+time.Minute)) {
			t.Errorf("secret proceed says the old secret retires at %q (%v), want an hour from now (--grace 1h)", out, err)
		}
	})

	t.Run("proceed -o json", func(t *testing.T) {
		old := rotateUntilDeciding(t)
		began := time.Now()
		stdout, stderr, code := e.runSplit(t, keyEnv, "", "secret", "proceed", "--endpoint", old, "--yes", "-o", "json")
		if code != 0 {
			t.Fatalf("secret proceed -o json: exit %d\n%s%s", code, stdout, stderr)
		}
		var st workflows.SecretRotationStatus
		if err := json.Unmarshal([]byte(stdout), &st); err != nil || st.Step != workflows.RotationDone || !st.OldSecretStored ||
			st.OldRetiresAt.Before(began.Add(time.Hour-time.Minute)) || st.OldRetiresAt.After(time.Now().Add(time.Hour+time.Minute)) {
			t.Errorf("secret proceed -o json: %+v (%v); want done, the old secret stored and retiring in an hour\n%s", st, err, stdout)
		}
	})
}
