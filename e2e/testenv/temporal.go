package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/internal/cluster"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
)

// This file is the one way the tests get a Temporal server: a test of its
// own with DevServer (or cluster.StartFor), a package's shared ones through
// Shared.Main, its TestMain. Either way a server that cannot be had here
// (the temporal CLI or the cluster's binaries missing, PostgreSQL not
// answering) skips the tests, saying why, unless the environment requires
// the part (SITEOPS_REQUIRE_TEMPORAL, SITEOPS_REQUIRE_POSTGRES: .ci/run
// sets both), and then fails them; and each server is stopped by whoever
// started it, never restarted under tests that run on it.

// DevServer starts a dev server for t with opts and stops it when t ends.
func DevServer(t testing.TB, opts devserver.Options) *devserver.Server {
	t.Helper()
	s, err := devserver.Start(t.Context(), opts)
	if reason, require := unavailable(err); reason != "" {
		siteopstest.Missing(t, require, "%s", reason)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// unavailable says why err means that a Temporal server cannot be had
// here, and the variable that requires the missing part; "" for any other
// error.
func unavailable(err error) (reason, require string) {
	switch {
	case errors.Is(err, devserver.ErrCLIMissing), errors.Is(err, cluster.ErrToolsMissing):
		return err.Error(), siteopstest.RequireTemporal
	case errors.Is(err, cluster.ErrPostgresUnreachable):
		return err.Error(), siteopstest.RequirePostgres
	}
	return "", ""
}

// Shared is what a package's tests share and its TestMain sets up
// (Main): a directory, the Temporal servers, and the siteops binary.
type Shared struct {
	// Dir is the package's directory, removed when its tests end.
	Dir string
	// skip is why the package's tests skip: Temporal cannot be had here.
	skip  string
	mu    sync.Mutex
	stops []func()
}

// MainOptions say how a package's TestMain sets up what its tests share.
type MainOptions struct {
	// Name names the package in what Main prints.
	Name string
	// Start starts the Temporal servers the package's tests share, in
	// s.Dir, handing each one's stop to s.Stop so that Main stops it when
	// the tests end. An error that says a server cannot be had here skips
	// the package's tests (or fails them, where the part is required);
	// any other fails them. Start has two minutes.
	Start func(ctx context.Context, s *Shared) error
	// Binary, when set, is where Main puts the path of the siteops
	// binary, built once for the package.
	Binary *string
	// SkipEach runs the tests when a server cannot be had, for each to
	// skip itself, saying why (Shared.Need); otherwise none runs.
	SkipEach bool
	// Failed, when set, runs after a failure of the tests: to show what
	// the servers said.
	Failed func()
}

// Main sets up what the package's tests share, runs them and tears it
// down, and returns the exit code for os.Exit.
func (s *Shared) Main(m *testing.M, o MainOptions) int {
	dir, err := os.MkdirTemp("", "siteops-"+o.Name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.Name, err)
		return 1
	}
	s.Dir = dir
	defer func() { _ = os.RemoveAll(dir) }()
	defer s.stopAll()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err = o.Start(ctx, s)
	cancel()
	reason, require := unavailable(err)
	switch {
	case reason != "" && os.Getenv(require) != "":
		fmt.Fprintf(os.Stderr, "%s: %s is set, and %s\n", o.Name, require, reason)
		return 1
	case reason != "":
		s.skip = reason
		fmt.Fprintf(os.Stderr, "SKIP %s: %s (set %s=1 to make this a failure)\n", o.Name, reason, require)
		if o.SkipEach {
			return m.Run()
		}
		return 0
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s: %v\n", o.Name, err)
		return 1
	}
	if o.Binary != nil {
		if *o.Binary, err = siteopstest.Build(dir); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", o.Name, err)
			return 1
		}
	}
	code := m.Run()
	if code != 0 && o.Failed != nil {
		o.Failed()
	}
	return code
}

// Stop has Main call stop when the package's tests end (the last handed
// first). Tests may call it while others run.
func (s *Shared) Stop(stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, stop)
}

func (s *Shared) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, stop := range slices.Backward(s.stops) {
		stop()
	}
}

// Need skips t when the package's servers could not be had here.
func (s *Shared) Need(t testing.TB) {
	t.Helper()
	if s.skip != "" {
		t.Skipf("SKIP: %s", s.skip)
	}
}
