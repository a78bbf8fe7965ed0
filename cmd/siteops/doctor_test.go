package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/telemetry"
)

// TestDoctorBesideRunningProcesses runs doctor as the README's "run it by
// hand" does, beside a running worker: its metrics address, held by the
// worker's metrics endpoint, passes as in use by siteops; an ingress
// address held by something else still fails, naming the setting.
func TestDoctorBesideRunningProcesses(t *testing.T) {
	metrics, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() {
		served <- (&telemetry.Telemetry{Registry: prometheus.NewRegistry()}).ServeMetrics(ctx, metrics)
	}()
	t.Cleanup(func() { stop(); <-served }) //nolint:errcheck // its end, not its error, is awaited
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

	quietEnvironment(t)
	t.Setenv("SITEOPS_METRICS_ADDR", metrics.Addr().String())
	t.Setenv("SITEOPS_INGRESS_ADDR", other.Addr().String())
	out, err := runCLI(t, "", "doctor")
	if err == nil {
		t.Fatalf("doctor passed with an address held by a plain listener:\n%s", out)
	}
	for _, want := range []string{
		"ok    address SITEOPS_METRICS_ADDR " + metrics.Addr().String() + " is in use by a running siteops process",
		"fail  address SITEOPS_INGRESS_ADDR SITEOPS_INGRESS_ADDR=" + other.Addr().String() + " cannot be listened on",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
}

// quietEnvironment points every setting doctor reads away from anything
// real on this machine: Temporal refuses at once, the default store is in
// the test's directory, the API is not configured.
func quietEnvironment(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{
		"TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_CONFIG_FILE": t.TempDir() + "/none.toml", "TEMPORAL_PROFILE": "",
		"XDG_STATE_HOME": t.TempDir(), "SITEOPS_DATABASE_URL": "", "SITEOPS_SECRET_KEY": "",
		"AGENTSITE_BASE_URL": "", "AGENTSITE_API_KEY": "", "SITEOPS_LOG_FORMAT": "", "SITEOPS_LOG_LEVEL": "",
	} {
		t.Setenv(k, v)
	}
}
