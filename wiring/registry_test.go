package wiring

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestRegisterUntilStopped registers a process: the registry lists it at
// once with this release and its build, and no longer once it stops.
func TestRegisterUntilStopped(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	stop := register(t.Context(), st, "ingress", "build-x", slog.New(slog.NewTextHandler(io.Discard, nil)))
	got, err := st.Processes(t.Context(), time.Now().Add(-store.ProcessGone))
	if err != nil || len(got) != 1 || got[0].Role != "ingress" || got[0].Release != release.Number || got[0].BuildID != "build-x" {
		stop()
		t.Fatalf("registry after register = %+v, %v; want one ingress of release %d, build-x", got, err, release.Number)
	}
	stop()
	if got, err := st.Processes(t.Context(), time.Time{}); err != nil || len(got) != 0 {
		t.Errorf("registry after stop = %+v, %v; want it empty", got, err)
	}
}
