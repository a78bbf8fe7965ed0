package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// The files under test: the rules Prometheus loads and the dashboard whose
// queries must return data.
var (
	recordingRulesFile = filepath.Join("..", "deploy", "prometheus", "siteops-recording.yaml")
	alertingRulesFile  = filepath.Join("..", "deploy", "prometheus", "siteops-alerts.yaml")
	dashboardFile      = filepath.Join("..", "deploy", "grafana", "siteops.json")
)

// promServer is a Prometheus server the test started on loopback.
type promServer struct {
	url string
	log *siteopstest.Log
}

// startPrometheus runs Debian's prometheus with siteops' rule files,
// scraping targets (job → host:port) and evaluating the rules every
// second, on a port of internal/ports and a store in a temporary folder,
// until the test ends. Where prometheus is not installed the test skips
// with one line, unless SITEOPS_REQUIRE_PROMETHEUS is set (CI).
func startPrometheus(t *testing.T, targets map[string]string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("SITEOPS_REQUIRE_PROMETHEUS") != "" {
			t.Fatal("prometheus is not installed and SITEOPS_REQUIRE_PROMETHEUS is set: apt-get install prometheus")
		}
		t.Skip("SKIP: prometheus not found (apt-get install prometheus): the Prometheus scenario did not run")
	}
	var files []string
	for _, f := range []string{recordingRulesFile, alertingRulesFile} {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, abs)
	}
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files": files,
	}
	var scrapes []any
	for job, target := range targets {
		scrapes = append(scrapes, map[string]any{"job_name": job, "static_configs": []any{map[string]any{"targets": []string{target}}}})
	}
	cfg["scrape_configs"] = scrapes
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	p := &promServer{url: "http://127.0.0.1:" + strconv.Itoa(port), log: &siteopstest.Log{}}
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	siteopstest.Eventually(t, 30*time.Second, "Prometheus to be ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", p.log)
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// promSample is one sample of an instant query's answer.
type promSample struct {
	labels map[string]string
	value  float64
}

// query runs an instant query now.
func (p *promServer) query(t *testing.T, q string) []promSample {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ans); err != nil || ans.Status != "success" || ans.Data.ResultType != "vector" {
		t.Fatalf("query %q: %v %s %s: %s", q, err, ans.Status, ans.Error, b)
	}
	out := make([]promSample, 0, len(ans.Data.Result))
	for _, r := range ans.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %q: value %q: %v", q, s, err)
		}
		out = append(out, promSample{labels: r.Metric, value: v})
	}
	return out
}

// finite reports whether a query's answer holds a sample with a number
// (not NaN, not infinite): data an operator can read.
func finite(samples []promSample) bool {
	return slices.ContainsFunc(samples, func(s promSample) bool { return !math.IsNaN(s.value) && !math.IsInf(s.value, 0) })
}

// serviceLevelQueries returns every recorded series of the recording rules
// and every query of the dashboard's panels, each with what names it.
func serviceLevelQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(recordingRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Record string `json:"record"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Record] = "recording rule " + r.Record
		}
	}
	b, err = os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, q := range p.Targets {
				out[q.Expr] = fmt.Sprintf("panel %q", p.Title)
			}
			var inner []panel
			for _, raw := range p.Panels {
				var ip panel
				if err := json.Unmarshal(raw, &ip); err != nil {
					t.Fatal(err)
				}
				inner = append(inner, ip)
			}
			walk(inner)
		}
	}
	walk(d.Panels)
	if len(out) < 20 {
		t.Fatalf("read only %d queries from %s and %s", len(out), recordingRulesFile, dashboardFile)
	}
	return out
}

// TestPrometheusSeesTheServiceLevels runs a real Prometheus with siteops'
// rules against the siteops worker and ingress processes during a short
// scenario: two onboardings that wait for their knowledge (priority-lane
// events), two batches of leads (bulk-lane events), forged deliveries, and
// at last one dead letter. Every recording rule and every dashboard query
// returns a number, and the dead-letter alert stays quiet until the dead
// letter, then fires.
func TestPrometheusSeesTheServiceLevels(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil && os.Getenv("SITEOPS_REQUIRE_PROMETHEUS") == "" {
		t.Skip("SKIP: prometheus not found (apt-get install prometheus): the Prometheus scenario did not run")
	}
	e := newEnv(t, store.SQLite, simulator.Config{KnowledgeDelay: 2 * time.Second}) // 20 ms at the test's time scale
	metrics, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	w := startProcess(t, append(e.cliEnv(), "AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_METRICS_ADDR=127.0.0.1:"+strconv.Itoa(metrics),
		"SITEOPS_SECRET_KEY="+testSecretKey(), "SITEOPS_WORKER_VERSIONING=false", "SITEOPS_API_RATE_LIMIT=50"), "worker")
	ingressURL, admin, ingressLog := e.startIngressProcessFlags(t, nil, "SITEOPS_SECRET_KEY="+testSecretKey())
	prom := startPrometheus(t, map[string]string{
		"siteops-worker":  "127.0.0.1:" + strconv.Itoa(metrics),
		"siteops-ingress": strings.TrimPrefix(admin, "http://"),
	})
	siteopstest.Eventually(t, 60*time.Second, "the worker to start", func() bool {
		w.alive(t, "the worker")
		return strings.Contains(w.log.String(), "worker started")
	})
	siteopstest.Eventually(t, 30*time.Second, "Prometheus to scrape both processes", func() bool {
		return len(prom.query(t, `up == 1`)) == 2
	})
	e.register(t, &ingressRun{url: ingressURL}, "/webhooks/main", "lead.created", "knowledge.ready", "site.published")

	forge := func(round int) {
		t.Helper()
		for i := range 3 {
			if code := deliver(t, ingressURL, "/webhooks/main", fmt.Sprintf("evt_forged_%d_%d", round, i), "whsec_forged_e2e"); code != http.StatusUnauthorized {
				t.Errorf("a forged delivery was answered %d, want 401", code)
			}
		}
		if code := deliver(t, ingressURL, "/webhooks/nobody", fmt.Sprintf("evt_forged_%d_x", round), "whsec_forged_e2e"); code != http.StatusUnauthorized {
			t.Errorf("a delivery to an unknown receiver was answered %d, want 401", code)
		}
	}
	// One round of the scenario: forged deliveries, an onboarding that
	// waits for its knowledge, then leads on its site through the relay.
	round := func(n int) {
		t.Helper()
		forge(n)
		p := prepare(t, "../examples/acme-anvils.yaml", fmt.Sprintf("prometheus-%d", n))
		p.Input.WaitForKnowledge = true
		p.Input.KnowledgeTimeout = workflows.Duration(time.Minute)
		res := e.onboard(t, p, time.Minute)
		if res.Status != "published" || res.KnowledgeReady != 2 {
			t.Fatalf("onboarding %d = %+v", n, res)
		}
		if _, err := e.Sim.CreateLeads(res.SiteID, 5); err != nil {
			t.Fatal(err)
		}
		siteopstest.Eventually(t, time.Minute, "the leads in the store", func() bool {
			k, _ := e.Store.CountLeads(t.Context(), res.SiteID)
			return k == 5
		})
	}
	round(1)
	// The histograms exist once Prometheus has scraped them: the second
	// round's samples then make their rates (and percentiles) numbers.
	for _, q := range []string{
		`siteops_onboarding_time_to_published_seconds_count`, `siteops_lead_sync_lag_seconds_count`,
		`siteops_relay_signal_delay_seconds_count{lane="priority"}`, `siteops_relay_signal_delay_seconds_count{lane="bulk"}`,
	} {
		siteopstest.Eventually(t, 30*time.Second, "Prometheus to scrape "+q, func() bool { return len(prom.query(t, q)) > 0 })
	}
	round(2)

	// Every recording rule and every panel's query returns a number.
	queries := serviceLevelQueries(t)
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing = missing[:0]
		for q, what := range queries {
			if !finite(prom.query(t, q)) {
				missing = append(missing, fmt.Sprintf("%s: %s", what, q))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // the next scrape and evaluation
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("no data after 30 s for %s", m)
	}
	if got := prom.query(t, `sum(siteops_webhook_deliveries_total{outcome="rejected",reason="invalid_signature"})`); len(got) != 1 || got[0].value != 6 {
		t.Errorf("Prometheus counts %v forged deliveries with a bad signature, want 6", got)
	}

	// No dead letter, no alert; then one dead letter, and the alert fires.
	siteopstest.Eventually(t, 30*time.Second, "the inbox to be drained", func() bool {
		st, err := e.Store.InboxStatus(t.Context())
		return err == nil && st.Undispatched == 0
	})
	deadAlert := `ALERTS{alertname="SiteopsWebhookDeadLetters",alertstate="firing"}`
	if got := prom.query(t, `siteops:relay_dead_letters:max`); len(got) != 1 || got[0].value != 0 {
		t.Fatalf("siteops:relay_dead_letters:max = %v before any dead letter, want 0", got)
	}
	if got := prom.query(t, `ALERTS{alertname="SiteopsWebhookDeadLetters"}`); len(got) != 0 {
		t.Errorf("the dead-letter alert is %v without a dead letter", got)
	}
	makeDeadLetter(t, e)
	siteopstest.Eventually(t, 20*time.Second, "the dead-letter alert to fire", func() bool {
		return len(prom.query(t, deadAlert)) == 1
	})
	if got := prom.query(t, deadAlert); got[0].labels["job"] != "siteops-ingress" || got[0].labels["severity"] != "warning" {
		t.Errorf("the dead-letter alert has labels %v", got[0].labels)
	}
	if t.Failed() {
		t.Logf("ingress log:\n%s\nprometheus log:\n%s", ingressLog, prom.log)
	}
}

// makeDeadLetter makes one dead letter in the test's store while the
// ingress's relay runs, as a relay with one attempt against a Temporal
// that refuses it does: the event is recorded two hours ahead on the clock
// of that relay and its store, so the ingress's relay never claims it.
func makeDeadLetter(t *testing.T, e *env) {
	t.Helper()
	var mu sync.Mutex
	ahead := func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(2 * time.Hour) }
	st, err := store.Open(t.Context(), e.DBURL, store.Options{Clock: ahead})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const id = "evt_prometheus_dead"
	body := `{"id":"` + id + `","type":"lead.created","created_at":"2026-11-25T09:00:00.000Z","data":{"site_id":"site_dead","lead_id":"lead_dead"}}`
	if _, err := st.RecordEvent(t.Context(), store.InboxEvent{EventID: id, EventType: "lead.created", Lane: store.LaneBulk, EndpointID: "env",
		ReceivedAt: ahead(), Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	rl := relay.New(relay.Options{Store: st, Temporal: &refusingTemporal{}, TaskQueue: taskQueue, MaxAttempts: 1,
		Batch: 1, BulkBatch: 1, LeadCoalesce: -1, Now: ahead})
	if n, err := rl.DispatchOnce(t.Context(), store.LaneBulk); n != 1 || err != nil {
		t.Fatalf("the dead letter's relay claimed %d events: %v", n, err)
	}
	if outcome, attempts, err := e.Store.InboxOutcome(t.Context(), id); outcome != store.OutcomeDead || attempts != 1 || err != nil {
		t.Fatalf("%s: outcome %q after %d attempts (%v); want a dead letter after 1", id, outcome, attempts, err)
	}
}
