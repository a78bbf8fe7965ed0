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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/internal/testcerts"
	"github.com/siteops/siteops/relay"
)

var (
	temporal *cluster.Cluster
	certs    testcerts.Files
	binary   string // the siteops binary, built once
	skip     string // why every test skips, when they do
)

const namespace = "siteops-prod"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "siteops-production")
	if err != nil {
		fmt.Fprintln(os.Stderr, "production:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if certs, err = testcerts.Write(dir, "cluster"); err != nil {
		fmt.Fprintln(os.Stderr, "production:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	temporal, err = cluster.Start(ctx, cluster.Options{
		Dir: filepath.Join(dir, "cluster"), Namespaces: []string{namespace},
		TLS: &cluster.TLS{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, ClientCAFile: certs.CA},
		// The ingress's certificate may only make the relay's calls
		// (signalonly_test.go).
		SignalOnly: []string{ingressName}, SignalStartTypes: relay.StartedTypes(),
	})
	switch {
	case errors.Is(err, cluster.ErrToolsMissing) && os.Getenv(siteopstest.RequireTemporal) != "",
		errors.Is(err, cluster.ErrPostgresUnreachable) && os.Getenv(siteopstest.RequirePostgres) != "":
		fmt.Fprintln(os.Stderr, "production:", err)
		return 1
	case errors.Is(err, cluster.ErrToolsMissing), errors.Is(err, cluster.ErrPostgresUnreachable):
		skip = err.Error()
		fmt.Fprintf(os.Stderr, "SKIP production: %v\n", err)
		return m.Run()
	case err != nil:
		fmt.Fprintln(os.Stderr, "production: starting the cluster:", err)
		return 1
	}
	defer func() { _ = temporal.Stop() }()
	fmt.Fprintf(os.Stderr, "production: cluster with mutual TLS up in %s at %s\n", time.Since(start).Round(time.Millisecond), temporal.Address)
	if binary, err = siteopstest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "production:", err)
		return 1
	}
	return m.Run()
}

// need skips t when the cluster could not be had here.
func need(t *testing.T) {
	t.Helper()
	if skip != "" {
		t.Skipf("SKIP: %s", skip)
	}
}
