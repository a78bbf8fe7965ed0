package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// TestReadStoreStatus reads a migrated store that no release was
// finalized for: its schema, the contract steps left and the processes
// seen recently; and a store that cannot be opened is reported, not
// returned.
func TestReadStoreStatus(t *testing.T) {
	ctx := t.Context()
	url := storetest.SQLiteURL(t)
	st, err := store.Open(ctx, url, store.Options{SecretKey: storetest.TestKey})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.Heartbeat(ctx, store.Process{ID: "w-1", Role: "worker", Release: release.Number, BuildID: "b1", Host: "h", StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	open := func(ctx context.Context) (*store.Store, string, error) {
		st, err := store.Open(ctx, url, store.Options{NoMigration: true})
		return st, "here", err
	}

	ss := ReadStoreStatus(ctx, open, now)
	if ss.Error != "" || ss.Where != "here" || ss.Schema == 0 || ss.Pending != 0 || ss.Finalized != 0 || ss.Plan == nil {
		t.Errorf("ReadStoreStatus = %+v; want a migrated store at here, not finalized, with its contract steps", ss)
	}
	if len(ss.Processes) != 1 || ss.Processes[0].ID != "w-1" {
		t.Errorf("processes = %+v, want w-1", ss.Processes)
	}
	if later := ReadStoreStatus(ctx, open, now.Add(2*store.ProcessGone)); len(later.Processes) != 0 {
		t.Errorf("processes seen more than store.ProcessGone ago = %+v, want none", later.Processes)
	}

	cause := errors.New("no siteops database at x")
	ss = ReadStoreStatus(ctx, func(context.Context) (*store.Store, string, error) { return nil, "x", cause }, now)
	if ss.Error != cause.Error() || ss.Where != "x" {
		t.Errorf("ReadStoreStatus of a store that cannot be opened = %+v; want its error, where it is", ss)
	}
}

func TestDescribePlan(t *testing.T) {
	got := DescribePlan(store.ContractPlan{LegacySecrets: 3, LegacyActive: 2, UnusedTexts: 5})
	want := "re-seal 3 secret(s) stored in the first format (2 active), date 5 knowledge text(s) stored without used_at"
	if got != want {
		t.Errorf("DescribePlan = %q, want %q", got, want)
	}
}

// TestThisBuild tells the build id a versioned worker would poll as, or
// why it would refuse to start.
func TestThisBuild(t *testing.T) {
	b := ThisBuild("v9", "build-1")
	if b.Version != "v9" || b.Release != release.Number || b.BuildID != "build-1" || b.BuildIDSource != release.FromEnv || b.BuildIDError != "" {
		t.Errorf("ThisBuild with SITEOPS_BUILD_ID = %+v", b)
	}
	b = ThisBuild("v9", "latest")
	if b.BuildID != "" || b.BuildIDSource != "" || !strings.Contains(b.BuildIDError, "latest") {
		t.Errorf("ThisBuild with a placeholder build id = %+v; want the reason it names no build", b)
	}
}
