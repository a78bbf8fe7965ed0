// Package production runs siteops in the shape its users run it: a real
// Temporal cluster on PostgreSQL (frontend, history, matching and worker as
// separate processes) serving mutual TLS, several worker and ingress
// processes of the siteops binary sharing one PostgreSQL store, and the
// simulator of the Agent-Site API. make test runs a short version of the
// scale-out scenario; make soak (SITEOPS_SOAK=1) the full one.
//
// Without PostgreSQL at 127.0.0.1:5432 (or SITEOPS_TEST_POSTGRES_URL) every
// test here skips, saying so, unless SITEOPS_REQUIRE_POSTGRES is set (CI
// sets it: .ci/run). Without the cluster's binaries (make cluster-tools)
// they skip too, unless SITEOPS_REQUIRE_TEMPORAL is set.
package production

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/testcerts"
	"github.com/siteops/siteops/wiring"
)

var (
	temporal *cluster.Cluster
	certs    testcerts.Files
	world    testenv.Shared // the package's directory and its cluster
	binary   string         // the siteops binary, built once
)

const namespace = "siteops-prod"

func TestMain(m *testing.M) {
	os.Exit(world.Main(m, testenv.MainOptions{Name: "production", Start: startCluster, Binary: &binary, SkipEach: true}))
}

// startCluster starts the cluster the tests share: on PostgreSQL, serving
// mutual TLS.
func startCluster(ctx context.Context, w *testenv.Shared) error {
	var err error
	if certs, err = testcerts.Write(w.Dir, "cluster"); err != nil {
		return err
	}
	start := time.Now()
	temporal, err = cluster.Start(ctx, cluster.Options{
		Dir: filepath.Join(w.Dir, "cluster"), Namespaces: append([]string{namespace}, partners...),
		TLS: &cluster.TLS{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, ClientCAFile: certs.CA},
		// Default deny, each certificate its role's calls (roles_test.go):
		// the cluster's own certificate is admin, siteops' processes'
		// (certs.ClientCert) worker.
		Policy: wiring.TemporalPolicy(namespace, policyQueue),
	})
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	w.Stop(func() { _ = temporal.Stop() })
	fmt.Fprintf(os.Stderr, "production: cluster with mutual TLS up in %s at %s\n", time.Since(start).Round(time.Millisecond), temporal.Address)
	return nil
}
