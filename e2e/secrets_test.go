package e2e

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// startIngressProcess runs `siteops ingress` with extra settings until the
// test ends and returns its URL and its log.
func (e *env) startIngressProcess(t *testing.T, extra ...string) (string, *siteopstest.Log) {
	t.Helper()
	url, _, log := e.startIngressProcessAdmin(t, extra...)
	return url, log
}

// startIngressProcessAdmin is startIngressProcess, and returns the URL of
// the ingress's admin address too (/metrics, /readyz), which is not the
// webhook port's.
func (e *env) startIngressProcessAdmin(t *testing.T, extra ...string) (url, admin string, log *siteopstest.Log) {
	t.Helper()
	return e.startIngressProcessFlags(t, nil, extra...)
}

// startIngressProcessFlags is startIngressProcessAdmin with flags for
// `siteops ingress`.
func (e *env) startIngressProcessFlags(t *testing.T, flags []string, extra ...string) (url, admin string, log *siteopstest.Log) {
	t.Helper()
	ps, err := ports.FreeN(2)
	if err != nil {
		t.Fatal(err)
	}
	addr, adminAddr := "127.0.0.1:"+itoa(ps[0]), "127.0.0.1:"+itoa(ps[1])
	log = &siteopstest.Log{}
	cmd := exec.Command(binary, append([]string{"ingress"}, flags...)...)
	cmd.Env = append(e.cliEnv(), append([]string{"SITEOPS_INGRESS_ADDR=" + addr, "SITEOPS_INGRESS_ADMIN_ADDR=" + adminAddr}, extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() })
	url, admin = "http://"+addr, "http://"+adminAddr
	siteopstest.Eventually(t, 20*time.Second, "the ingress to be ready", func() bool {
		resp, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	// Ready, the process has logged its checks, but its log reaches the
	// buffer through a pipe: once "ingress listening" (logged after them)
	// is there, so is every line before it.
	siteopstest.Eventually(t, 10*time.Second, "the ingress's log to say it listens", func() bool {
		return strings.Contains(log.String(), "ingress listening")
	})
	return url, admin, log
}

// deliver posts a signed lead.created to url+path and returns the status.
func deliver(t *testing.T, url, path, id, secret string) int {
	t.Helper()
	body := `{"id":"` + id + `","type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_x","lead_id":"lead_1"}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+path, strings.NewReader(body))
	req.Header.Set("svc-event-id", id)
	req.Header.Set("svc-event-type", "lead.created")
	req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestSecretsUnderAnotherKey changes SITEOPS_SECRET_KEY under a running
// system: the secret it cannot read is skipped (the others still verify),
// named by the ingress's log and metrics, doctor and webhook list; storing
// a new secret is refused; `secret rekey` moves it to the new key, and then
// everything verifies again.
func TestSecretsUnderAnotherKey(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	oldKey := storetest.TestKey
	newKey := []byte("a-new-siteops-secret-key-32bytes")
	const envSecret = "whsec_env_default" //nolint:gosec // made up for the test
	// An endpoint on the default receiver, its secret stored under the old
	// key (e.Store uses it). Its URL refuses connections: the test sends
	// the deliveries itself.
	defaultReceiver := ""
	oldID, storedSecret := e.endpointOf(t, "http://127.0.0.1:9/webhooks", &defaultReceiver)
	withNew := []string{"SITEOPS_SECRET_KEY=" + base64.StdEncoding.EncodeToString(newKey), "SITEOPS_WEBHOOK_SECRETS=" + envSecret,
		"AGENTSITE_BASE_URL=" + e.SimURL, "AGENTSITE_API_KEY=" + apiKey, "SITEOPS_ALLOW_LOOPBACK_RECEIVERS=true"}
	// The ingress refuses to start beside a secret it cannot read unless
	// told to start anyway, as an operator keeping the other receivers up
	// would.
	url, admin, log := e.startIngressProcessFlags(t, []string{"--skip-checks"}, withNew...)
	// The worker stores endpoint secrets: it runs with the new key too.
	worker := exec.Command(binary, "worker", "--skip-checks")
	worker.Env = append(e.cliEnv(), append(withNew, "SITEOPS_METRICS_ADDR=")...)
	worker.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Process.Signal(syscall.SIGTERM); _, _ = worker.Process.Wait() })

	if code := deliver(t, url, "/webhooks", "evt_env_1", envSecret); code != http.StatusOK {
		t.Errorf("a delivery signed with the configured secret = %d, want 200 although a stored secret does not decrypt", code)
	}
	if code := deliver(t, url, "/webhooks", "evt_old_1", storedSecret); code != http.StatusUnauthorized {
		t.Errorf("a delivery signed with the unreadable secret = %d, want 401, as an unknown receiver gets (the sender retries until the key is fixed)", code)
	}
	siteopstest.Eventually(t, 10*time.Second, "the ingress to name the unreadable secret", func() bool {
		return strings.Contains(log.String(), oldID) && strings.Contains(log.String(), "siteops secret rekey")
	})
	if m := scrape(t, admin+"/metrics"); !strings.Contains(m, `siteops_webhook_unreadable_secrets{receiver="default"} 1`) {
		t.Errorf("the metric does not count the unreadable secret:\n%s", grepLines(m, "unreadable"))
	}
	if strings.Contains(log.String(), storedSecret) || strings.Contains(log.String(), envSecret) {
		t.Errorf("the ingress logged a secret")
	}
	out, code := e.run(t, withNew, "doctor")
	if code != 4 || !strings.Contains(out, "fail  secret key") || !strings.Contains(out, oldID+" (receiver default)") {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
	out, code = e.run(t, withNew, "webhook", "list")
	if code != 0 || !strings.Contains(out, oldID) || !strings.Contains(out, "secret UNREADABLE") || !strings.Contains(out, "siteops secret rekey") {
		t.Errorf("webhook list does not name the unreadable secret: exit %d\n%s", code, out)
	}
	out, code = e.run(t, withNew, "webhook", "create", "--url", url+"/webhooks/v9", "--events", "lead.created", "--timeout", "1m")
	if code == 0 || !strings.Contains(out, "siteops secret rekey") || !strings.Contains(out, "[SecretKey]") {
		t.Errorf("webhook create beside an unreadable secret: exit %d\n%s", code, out)
	}
	if n := len(e.endpoints(t)); n != 1 {
		t.Errorf("%d endpoints, want only the first: one was created although its secret could not be stored", n)
	}

	out, code = e.run(t, append(withNew, "SITEOPS_OLD_SECRET_KEY="+base64.StdEncoding.EncodeToString(oldKey)), "secret", "rekey")
	if code != 0 || !strings.Contains(out, "re-encrypted 1 secret") {
		t.Fatalf("secret rekey: exit %d\n%s", code, out)
	}
	if out, code := e.run(t, withNew, "doctor"); code != 0 {
		t.Errorf("doctor after rekey: exit %d\n%s", code, out)
	}
	siteopstest.Eventually(t, 10*time.Second, "the rekeyed secret to verify again", func() bool {
		return deliver(t, url, "/webhooks", "evt_old_2", storedSecret) == http.StatusOK
	})
}

// TestWebhookCreateKeepsItsKeyAcrossRetries loses the answer of the first
// endpoint creation after the service applied it: the registration retries
// under the same idempotency key, and running the same command again
// reports the endpoint instead of creating a second one.
func TestWebhookCreateKeepsItsKeyAcrossRetries(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	if err := e.Sim.SetFaults(simulator.Faults{DropRate: 1}); err != nil {
		t.Fatal(err)
	}
	env := []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}
	hookURL := "http://127.0.0.1:9/webhooks/v1"
	type result struct {
		out  string
		code int
	}
	first := make(chan result, 1)
	go func() {
		out, code := e.run(t, env, "webhook", "create", "--url", hookURL, "--events", "lead.created,knowledge.ready", "--timeout", "1m")
		first <- result{out, code}
	}()
	siteopstest.Eventually(t, 30*time.Second, "the create to be applied and its answer lost", func() bool {
		for _, r := range e.Sim.Requests() {
			if r.Method == http.MethodPost && r.Path == "/api/v1/webhook-endpoints" && r.Fault == "drop_after_apply" {
				return true
			}
		}
		return false
	})
	if err := e.Sim.SetFaults(simulator.Faults{}); err != nil {
		t.Fatal(err)
	}
	r := <-first
	if r.code != 0 || !strings.Contains(r.out, "secret stored") {
		t.Fatalf("webhook create with its first answer lost: exit %d\n%s", r.code, r.out)
	}
	again, code := e.run(t, env, "webhook", "create", "--url", hookURL, "--events", "knowledge.ready,lead.created")
	if code != 0 || !strings.Contains(again, "already registered") {
		t.Errorf("the same command again: exit %d\n%s", code, again)
	}
	eps := e.endpoints(t)
	if len(eps) != 1 {
		t.Fatalf("%d endpoints, want exactly one", len(eps))
	}
	creates, replayed := 0, 0
	for _, r := range e.Sim.Requests() {
		if r.Method == http.MethodPost && r.Path == "/api/v1/webhook-endpoints" {
			creates++
			if r.Replayed {
				replayed++
			}
		}
	}
	if creates != 2 || replayed != 1 {
		t.Errorf("%d creates (%d replayed), want the lost one and its replay under the same key", creates, replayed)
	}
	set, err := e.Store.ActiveSecrets(context.Background(), "v1")
	if err != nil || len(set.Infos) != 1 || set.Infos[0].EndpointID != eps[0].ID || !strings.Contains(r.out, set.Infos[0].Fingerprint) {
		t.Errorf("stored secrets = %+v, %v; want the one endpoint's, with the fingerprint printed", set.Infos, err)
	}
	// A deliberate second registration of the same URL is a new operation.
	if out, code := e.run(t, env, "webhook", "create", "--url", hookURL, "--events", "lead.created,knowledge.ready", "--label", "second"); code != 0 || strings.Contains(out, "already") {
		t.Errorf("a labelled second registration: exit %d\n%s", code, out)
	}
	if n := len(e.endpoints(t)); n != 2 {
		t.Errorf("%d endpoints after the labelled registration, want 2", n)
	}
	recordHistory(t, e, workflows.EndpointRegistrationID(hookURL, []string{"lead.created", "knowledge.ready"}, "v1", ""), "endpoint_registration")
}

// TestWebhookCreateAgainIsTruthfulAboutItsSecret repeats a registration
// that succeeded after its endpoint's secret was retired (as the
// reconciliation does once the endpoint is deleted): the command no longer
// says the secret is stored; it says it was retired, what to do, and exits
// 1.
func TestWebhookCreateAgainIsTruthfulAboutItsSecret(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	env := []string{"SITEOPS_SECRET_KEY=" + testSecretKey()}
	args := []string{"webhook", "create", "--url", "http://127.0.0.1:9/webhooks/v1", "--events", "lead.created", "--timeout", "1m"}
	if out, code := e.run(t, env, args...); code != 0 || !strings.Contains(out, "secret stored") {
		t.Fatalf("webhook create: exit %d\n%s", code, out)
	}
	if out, code := e.run(t, env, args...); code != 0 || !strings.Contains(out, "already registered") || !strings.Contains(out, "its secret is stored") {
		t.Errorf("the same command again: exit %d\n%s", code, out)
	}
	eps := e.endpoints(t)
	if len(eps) != 1 {
		t.Fatalf("%d endpoints, want one", len(eps))
	}
	if err := e.api(t).DeleteWebhookEndpoint(t.Context(), "dashboard-delete", eps[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Retire(t.Context(), eps[0].ID, time.Now()); err != nil { // what the reconciliation does next
		t.Fatal(err)
	}
	out, code := e.run(t, env, args...)
	if code != 1 || !strings.Contains(out, "its secret was retired at") || strings.Contains(out, "its secret is stored") || strings.Contains(out, "; secret stored") {
		t.Errorf("the same command after the secret was retired: exit %d\n%s\nwant exit 1 saying the secret was retired", code, out)
	}
	out, code = e.run(t, env, append(args, "-o", "json")...)
	if code != 1 || !strings.Contains(out, `"secret": "retired"`) {
		t.Errorf("-o json after the secret was retired: exit %d\n%s", code, out)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// endpoints lists the account's webhook endpoints through the API.
func (e *env) endpoints(t *testing.T) []agentsite.WebhookEndpoint {
	t.Helper()
	api, err := agentsite.NewClient(e.SimURL, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	eps, err := api.ListWebhookEndpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return eps
}
