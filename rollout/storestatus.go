package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/store"
)

// StoreStatus is where the store stands in a rollout, as `siteops release
// status` shows it: its schema, the release it was finalized for, the
// contract steps left, and the processes that recently said which release
// they run.
type StoreStatus struct {
	Where string `json:"where,omitempty"`
	// Error is why the store could not be read; the fields after it are
	// then what was read before it.
	Error     string              `json:"error,omitempty"`
	Schema    int64               `json:"schema_version"`
	Pending   int                 `json:"pending_migrations"`
	Ahead     []int64             `json:"migrations_of_a_later_release,omitempty"`
	Finalized int                 `json:"finalized_release"`
	Plan      *store.ContractPlan `json:"contract_steps_left,omitempty"`
	Processes []store.Process     `json:"processes"`
}

// ReadStoreStatus reads the store as it is: open opens it read-only and
// returns where it is (wiring.InspectStoreFromEnv). A store that cannot be
// opened or read is reported in Error, not returned: the rollout's
// Temporal side stands alone. The processes are those seen within store.ProcessGone
// before now.
func ReadStoreStatus(ctx context.Context, open func(context.Context) (*store.Store, string, error), now time.Time) StoreStatus {
	var ss StoreStatus
	st, where, err := open(ctx)
	ss.Where = where
	if err != nil {
		ss.Error = err.Error()
		return ss
	}
	defer func() { _ = st.Close() }()
	fail := func(err error) StoreStatus { ss.Error = err.Error(); return ss }
	if ss.Schema, ss.Pending, err = st.PendingMigrations(ctx); err != nil {
		return fail(err)
	}
	if ss.Ahead, err = st.AheadMigrations(ctx); err != nil {
		return fail(err)
	}
	if ss.Finalized, err = st.FinalizedRelease(ctx); err != nil {
		return fail(err)
	}
	if ss.Pending > 0 {
		return ss // the registry may not exist yet
	}
	if ss.Finalized < release.Number {
		plan, err := st.Plan(ctx)
		if err != nil {
			return fail(err)
		}
		ss.Plan = &plan
	}
	if ss.Processes, err = st.Processes(ctx, now.Add(-store.ProcessGone)); err != nil {
		return fail(err)
	}
	return ss
}

// DescribePlan words the contract steps left.
func DescribePlan(p store.ContractPlan) string {
	return fmt.Sprintf("re-seal %d secret(s) stored in the first format (%d active), date %d knowledge text(s) stored without used_at", p.LegacySecrets, p.LegacyActive, p.UnusedTexts)
}
