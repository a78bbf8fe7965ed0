package deploy_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry"
)

// TestProbe runs `siteops probe`, the compose health check, against the
// real endpoints it asks, on an address without a host as compose sets it
// (":PORT"): exit 0 while the worker serves /healthz and the ingress
// /readyz; 1 with one line when the ingress's store is down or nothing
// listens; 2 when the address is empty (nothing to probe).
func TestProbe(t *testing.T) {
	// probe runs `siteops probe ROLE` with the variables after ROLE.
	probe := func(t *testing.T, env ...string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), binary, "probe", env[0]) //nolint:gosec // the binary this test built
		cmd.Env = append(os.Environ(), env[1:]...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	listen := func(t *testing.T, h http.Handler) (port string, stop func()) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h} //nolint:gosec // a test server on loopback
		go func() { _ = srv.Serve(ln) }()
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		return port, func() { _ = srv.Close() }
	}

	st := storetest.Open(t, store.SQLite)
	admin := ingress.NewHandler(ingress.Options{Inbox: st, EnvSecrets: []string{"whsec_x"}}).Admin()
	ingressPort, stopIngress := listen(t, admin)
	defer stopIngress()

	tel, err := telemetry.Setup(t.Context(), telemetry.Options{Service: "deploy-probe-test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _ = tel.ServeMetrics(ctx, ln) }()
	workerPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	closed, stopClosed := listen(t, http.NotFoundHandler())
	stopClosed()

	for _, tc := range []struct {
		name     string
		env      []string
		wantCode int
		want     string
	}{
		{"worker serving", []string{"worker", "SITEOPS_METRICS_ADDR=:" + workerPort}, 0, ""},
		{"ingress ready", []string{"ingress", "SITEOPS_INGRESS_ADMIN_ADDR=:" + ingressPort}, 0, ""},
		{"nothing listening", []string{"ingress", "SITEOPS_INGRESS_ADMIN_ADDR=:" + closed}, 1, "does not answer"},
		{"no admin address", []string{"ingress", "SITEOPS_INGRESS_ADMIN_ADDR="}, 2, "SITEOPS_INGRESS_ADMIN_ADDR is empty"},
		{"no metrics address", []string{"worker", "SITEOPS_METRICS_ADDR="}, 2, "SITEOPS_METRICS_ADDR is empty"},
		{"unknown role", []string{"relay"}, 2, "probe worker or ingress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := probe(t, tc.env...)
			if code != tc.wantCode || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("siteops probe %s: exit %d (want %d), output %q (want one line with %q)", tc.env[0], code, tc.wantCode, out, tc.want)
			}
		})
	}

	// Readiness follows the store: with it closed the ingress is not ready.
	_ = st.Close()
	if code, out := probe(t, "ingress", "SITEOPS_INGRESS_ADMIN_ADDR=:"+ingressPort); code != 1 || !strings.Contains(out, "503") {
		t.Errorf("siteops probe ingress with the store down: exit %d, %q; want 1 naming the 503", code, out)
	}
	cancel()
	if code, _ := probe(t, "worker", "SITEOPS_METRICS_ADDR=:"+workerPort); code != 1 {
		t.Errorf("siteops probe worker after the worker stopped: exit %d; want 1", code)
	}
}
