package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// The Prometheus files: the recording rules (the service levels), the
// alerting rules on them, their promtool unit tests, and the configuration
// compose runs Prometheus with.
var (
	recordingRules = filepath.Join("prometheus", "siteops-recording.yaml")
	alertingRules  = filepath.Join("prometheus", "siteops-alerts.yaml")
	ruleTests      = filepath.Join("prometheus", "tests", "siteops-rules.test.yaml")
	promConfig     = filepath.Join("prometheus", "prometheus.yml")
)

// rule is one recording or alerting rule of a rule file.
type rule struct {
	Record      string            `json:"record"`
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// rules reads the rules of a rule file, group by group.
func rules(t *testing.T, path string) []rule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if n := len(docs(t, path)); n != 1 {
		t.Fatalf("%s holds %d documents, want 1", path, n)
	}
	if err := yaml.UnmarshalStrict([]byte(read(t, path)), &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []rule
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: group %q is unnamed or empty", path, g.Name)
		}
		out = append(out, g.Rules...)
	}
	return out
}

// recorded returns the names of the recorded series.
func recorded(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range rules(t, recordingRules) {
		out[r.Record] = true
	}
	return out
}

// exportedMetrics returns the names of the metrics an ingress's relay
// exports, as its Prometheus exporter names them, once its first round
// has set the gauges.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	rl := relay.New(relay.Options{Store: storetest.Open(t, store.SQLite), Metrics: relay.NewMetrics(reg), Idle: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = rl.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	names := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for !names["siteops_relay_lag_seconds"] {
		if time.Now().After(deadline) {
			t.Fatalf("the relay exported no lag gauge within 10 s; it exported %v", names)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			names[mf.GetName()] = true
		}
		time.Sleep(10 * time.Millisecond) // poll the registry
	}
	return names
}

var (
	// metricName finds the siteops metrics an expression reads.
	metricName = regexp.MustCompile(`\bsiteops_[a-z_]+\b`)
	// recordedName finds the recorded series an expression reads
	// (level:metric:operations).
	recordedName = regexp.MustCompile(`\bsiteops:[a-z0-9_]+:[a-z0-9_]+\b`)
)

// checkMetricsKnown checks that every siteops metric expr reads is one the
// relay exports or docs/observability.md and docs/webhooks.md document
// (worker metrics, and histograms that appear with their first sample), and
// every recorded series one the recording rules make.
func checkMetricsKnown(t *testing.T, where, expr string, exported, rec map[string]bool, readme string) {
	t.Helper()
	for _, name := range metricName.FindAllString(expr, -1) {
		family := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && strings.HasSuffix(base, "_seconds") {
				family = base
			}
		}
		if !exported[family] && !strings.Contains(readme, "`"+family) {
			t.Errorf("%s reads %s, which the relay does not export and neither docs/observability.md nor docs/webhooks.md documents", where, name)
		}
	}
	for _, name := range recordedName.FindAllString(expr, -1) {
		if !rec[name] {
			t.Errorf("%s reads %s, which no rule of %s records", where, name, recordingRules)
		}
	}
}

// headingAnchor is the anchor GitHub gives a Markdown heading.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// readmeAnchors returns the anchors of docs/observability.md's headings.
func readmeAnchors(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(read(t, "../docs/observability.md"), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			out[headingAnchor(strings.TrimLeft(h, "#"))] = true
		}
	}
	return out
}

// commandExists reports whether `siteops args...` names a command: the
// first word a command, the second a subcommand of it when it has any
// (`siteops status onboarding/x` is the command status with an argument).
func commandExists(t *testing.T, args []string) bool {
	t.Helper()
	out, err := exec.Command(binary, args[0], "--help").Output()
	if err != nil || !strings.Contains(string(out), "Usage:\n  siteops "+args[0]) {
		return false
	}
	if len(args) == 1 || !strings.Contains(string(out), "Available Commands:") {
		return true
	}
	// --help of an unknown subcommand shows the help of its parent.
	out, err = exec.Command(binary, args[0], args[1], "--help").Output()
	return err == nil && strings.Contains(string(out), "Usage:\n  siteops "+args[0]+" "+args[1])
}

// TestRecordingRules checks the service levels' rules offline: every rule
// records a level:metric:operations name once, from metrics siteops
// exports; every level docs/observability.md's table lists is recorded.
func TestRecordingRules(t *testing.T) {
	exported, readme := exportedMetrics(t), read(t, "../docs/observability.md")+read(t, "../docs/webhooks.md")
	rec := map[string]bool{}
	for _, r := range rules(t, recordingRules) {
		if r.Alert != "" || r.Record == "" || r.Expr == "" {
			t.Errorf("%s: %+v is not a recording rule", recordingRules, r)
			continue
		}
		if !recordedName.MatchString(r.Record) || recordedName.FindString(r.Record) != r.Record {
			t.Errorf("%s: %s is not named level:metric:operations (siteops:...:...)", recordingRules, r.Record)
		}
		if rec[r.Record] {
			t.Errorf("%s records %s twice", recordingRules, r.Record)
		}
		rec[r.Record] = true
		checkMetricsKnown(t, recordingRules+": "+r.Record, r.Expr, exported, map[string]bool{}, readme)
		if !strings.Contains(readme, "`"+r.Record+"`") {
			t.Errorf("docs/observability.md's service levels do not name %s", r.Record)
		}
	}
}

// TestAlertRules checks the alerting rules offline: they parse, every
// alert is complete and links a runbook that is a heading of docs/observability.md,
// every series it reads exists, and every siteops command an annotation
// tells the person on call to run exists.
func TestAlertRules(t *testing.T) {
	exported, rec, readme, anchors := exportedMetrics(t), recorded(t), read(t, "../docs/observability.md")+read(t, "../docs/webhooks.md"), readmeAnchors(t)
	command := regexp.MustCompile("`siteops ([a-z-]+)(?: ([a-z-]+))?")
	const runbooks = "https://github.com/siteops/siteops/blob/main/docs/observability.md#"
	alerts := map[string]bool{}
	for _, r := range rules(t, alertingRules) {
		if alerts[r.Alert] {
			t.Errorf("%s: two alerts named %s", alertingRules, r.Alert)
		}
		alerts[r.Alert] = true
		if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" {
			t.Errorf("%s: rule %+v is incomplete", alertingRules, r)
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("%s: %s has severity %q; want critical, warning or info", alertingRules, r.Alert, r.Labels["severity"])
		}
		if r.For != "" {
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: %s: for %q: %v", alertingRules, r.Alert, r.For, err)
			}
		}
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbooks)
		if !ok || !anchors[anchor] {
			t.Errorf("%s: %s links the runbook %q; want %s<a heading of docs/observability.md>", alertingRules, r.Alert, r.Annotations["runbook_url"], runbooks)
		}
		checkMetricsKnown(t, alertingRules+": "+r.Alert, r.Expr, exported, rec, readme)
		for _, m := range command.FindAllStringSubmatch(r.Annotations["description"], -1) {
			args := []string{m[1]}
			if m[2] != "" {
				args = append(args, m[2])
			}
			if !commandExists(t, args) {
				t.Errorf("%s: %s tells to run `siteops %s`, which does not exist", alertingRules, r.Alert, strings.Join(args, " "))
			}
		}
	}
	for _, want := range []string{"SiteopsWebhookDeadLetters", "SiteopsRelayLagging", "SiteopsWebhookErrorBudgetFastBurn", "SiteopsWebhookErrorBudgetSlowBurn"} {
		if !alerts[want] {
			t.Errorf("%s has no %s alert", alertingRules, want)
		}
	}
	if want := "20 failed dispatch"; !strings.Contains(read(t, alertingRules), want) || relay.DefaultMaxAttempts != 20 {
		t.Errorf("%s describes the dead-letter bound as %q; the relay's is %d", alertingRules, want, relay.DefaultMaxAttempts)
	}

	// Every alert has a unit test that sees it fire and one that sees it
	// quiet.
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal([]byte(read(t, ruleTests)), &tests); err != nil {
		t.Fatalf("%s: %v", ruleTests, err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for name := range alerts {
		if !fires[name] || !quiet[name] {
			t.Errorf("%s tests %s firing: %v, not firing: %v; want both", ruleTests, name, fires[name], quiet[name])
		}
	}
}

// promtool returns the path of Debian's promtool, or skips the test with
// one line where it is not installed (CI installs it and sets
// SITEOPS_REQUIRE_PROMETHEUS=1, which makes its absence a failure).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	if os.Getenv("SITEOPS_REQUIRE_PROMETHEUS") != "" {
		t.Fatalf("promtool is not installed and SITEOPS_REQUIRE_PROMETHEUS is set: apt-get install prometheus (Debian's package ships promtool)")
	}
	t.Skip("SKIP: promtool not found (apt-get install prometheus): the Prometheus rules' unit tests did not run")
	return ""
}

// TestPromtool runs promtool on the rule files (check rules), on their
// unit tests (test rules: each alert firing and not firing), and on
// compose's Prometheus configuration with its rule files where this
// checkout has them.
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
	run("check", "rules", recordingRules, alertingRules)
	run("test", "rules", ruleTests)

	// compose mounts deploy/prometheus at /etc/prometheus/siteops.
	const mount = "/etc/prometheus/siteops/"
	text := read(t, promConfig)
	if !strings.Contains(text, mount) {
		t.Fatalf("%s names no rule file under %s, where compose mounts deploy/prometheus", promConfig, mount)
	}
	abs, err := filepath.Abs("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(text, mount, abs+"/")), 0o600); err != nil {
		t.Fatal(err)
	}
	run("check", "config", local)
}
