package testenv

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
)

// TestWorkerDefaultsAreTheBinarys holds WorkerDefaults to the defaults
// config.Load gives `siteops worker` when no variable is set, but for the
// settings a test process runs differently.
func TestWorkerDefaultsAreTheBinarys(t *testing.T) {
	withoutSiteopsEnv(t)
	var want config.Worker
	if err := config.Load(&want); err != nil {
		t.Fatal(err)
	}
	want.MetricsAddr, want.Versioning, want.SecretReconcileEvery, want.LeadSweepEvery = "", false, NoReconcile, NoReconcile
	want.DeploymentName = ""
	if got := WorkerDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("WorkerDefaults() = %+v\nwant %+v (config's defaults, without metrics, versioning or a reconciliation in the test)", got, want)
	}
}

func TestEndToEndKeepsWhatIsSet(t *testing.T) {
	got := EndToEnd(simulator.Config{TimeScale: 7, Seed: 3})
	if got.TimeScale != 7 || got.Seed != 3 || got.KnowledgeDelay == 0 || !got.AllowLoopbackReceivers {
		t.Errorf("EndToEnd = %+v; want TimeScale 7 and Seed 3 kept, a KnowledgeDelay and loopback receivers filled in", got)
	}
}

// TestIngressDefaultsAreTheBinarys holds IngressDefaults to the defaults
// config.Load gives `siteops ingress` when no variable is set.
func TestIngressDefaultsAreTheBinarys(t *testing.T) {
	withoutSiteopsEnv(t)
	var want config.Ingress
	if err := config.Load(&want); err != nil {
		t.Fatal(err)
	}
	if got := IngressDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("IngressDefaults() = %+v\nwant %+v (config's defaults)", got, want)
	}
}

// withoutSiteopsEnv unsets every SITEOPS_* variable for the test, so that
// config.Load gives the binary's defaults; they are restored after it.
func withoutSiteopsEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "SITEOPS_") {
			t.Setenv(name, "") // restored after the test
			_ = os.Unsetenv(name)
		}
	}
}

// TestUnavailableNamesWhatIsRequired holds the one decision every way of
// getting a Temporal server shares: a missing CLI or cluster binary and an
// unreachable PostgreSQL are "cannot be had here" (skipped, unless their
// variable requires them), anything else is a failure.
func TestUnavailableNamesWhatIsRequired(t *testing.T) {
	for _, tc := range []struct {
		err     error
		require string
	}{
		{fmt.Errorf("%w: run make tools", devserver.ErrCLIMissing), siteopstest.RequireTemporal},
		{fmt.Errorf("starting the cluster: %w", fmt.Errorf("%w: no temporal-server", cluster.ErrToolsMissing)), siteopstest.RequireTemporal},
		{fmt.Errorf("starting the cluster: %w", cluster.ErrPostgresUnreachable), siteopstest.RequirePostgres},
		{errors.Join(fmt.Errorf("%w", devserver.ErrCLIMissing), errors.New("other")), siteopstest.RequireTemporal},
		{errors.New("the server did not answer in 60s"), ""},
		{nil, ""},
	} {
		reason, require := unavailable(tc.err)
		if require != tc.require || (require != "") != (reason != "") {
			t.Errorf("unavailable(%v) = %q, %q; want %q", tc.err, reason, require, tc.require)
		}
	}
}
