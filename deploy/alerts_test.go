package deploy_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/webhookingress"
)

// exportedMetrics returns the names of the metrics an ingress's relay
// exports, as its Prometheus exporter names them, once its first round
// has set the gauges.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	relay := &webhookingress.Relay{Store: storetest.Open(t, store.SQLite), Metrics: webhookingress.NewMetrics(reg), Idle: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = relay.Run(ctx) })
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

// TestAlertRules checks the example Prometheus rules offline: they parse,
// every rule is complete, every siteops metric an expression reads is one
// the relay exports, and every siteops command an annotation tells the
// person on call to run exists.
func TestAlertRules(t *testing.T) {
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	path := filepath.Join("prometheus", "siteops-alerts.yaml")
	if n := len(docs(t, path)); n != 1 {
		t.Fatalf("%s holds %d documents, want 1", path, n)
	}
	if err := yaml.Unmarshal([]byte(read(t, path)), &rules); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	exported := exportedMetrics(t)
	metric := regexp.MustCompile(`\bsiteops_[a-z_]+\b`)
	command := regexp.MustCompile("`siteops ([a-z-]+)(?: ([a-z-]+))?")
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" {
				t.Errorf("%s: rule %+v is incomplete", path, r)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: %s: for %q: %v", path, r.Alert, r.For, err)
			}
			for _, name := range metric.FindAllString(r.Expr, -1) {
				if !exported[name] {
					t.Errorf("%s: %s reads %s, which the relay does not export", path, r.Alert, name)
				}
			}
			for _, m := range command.FindAllStringSubmatch(r.Annotations["description"], -1) {
				args := []string{m[1]}
				if m[2] != "" {
					args = append(args, m[2])
				}
				// --help of an unknown command shows the help of its parent.
				out, err := exec.Command(binary, append(args, "--help")...).Output()
				if err != nil || !strings.Contains(string(out), "Usage:\n  siteops "+strings.Join(args, " ")) {
					t.Errorf("%s: %s tells to run `siteops %s`, which does not exist", path, r.Alert, strings.Join(args, " "))
				}
			}
		}
	}
	for _, want := range []string{"SiteopsWebhookDeadLetters", "SiteopsRelayLagging"} {
		if !alerts[want] {
			t.Errorf("%s has no %s alert", path, want)
		}
	}
	if want := "20 failed dispatch"; !strings.Contains(read(t, path), want) || webhookingress.DefaultMaxAttempts != 20 {
		t.Errorf("%s describes the dead-letter bound as %q; the relay's is %d", path, want, webhookingress.DefaultMaxAttempts)
	}
}
