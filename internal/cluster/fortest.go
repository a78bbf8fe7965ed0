package cluster

import (
	"errors"
	"testing"

	"github.com/siteops/siteops/internal/siteopstest"
)

// StartFor starts a cluster for a test with opts (Dir: a directory of t's
// when empty) and stops it when t ends. A cluster that cannot be had here
// skips t, saying why, or fails it when the variable that requires the
// missing part is set (siteopstest.Missing): the binaries
// (SITEOPS_REQUIRE_TEMPORAL) or PostgreSQL (SITEOPS_REQUIRE_POSTGRES).
func StartFor(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c, err := Start(t.Context(), opts)
	switch {
	case errors.Is(err, ErrToolsMissing):
		siteopstest.Missing(t, siteopstest.RequireTemporal, "%v", err)
	case errors.Is(err, ErrPostgresUnreachable):
		siteopstest.Missing(t, siteopstest.RequirePostgres, "%v", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	return c
}
