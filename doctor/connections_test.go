package doctor

import (
	"strings"
	"testing"

	"github.com/siteops/siteops/store"
)

func TestConnectionBudgetWarnsPastWhatTheServerAllows(t *testing.T) {
	procs := func(pools ...int) []store.Process {
		var out []store.Process
		for i, n := range pools {
			role := "worker"
			if i%2 == 1 {
				role = "ingress"
			}
			out = append(out, store.Process{ID: string(rune('a' + i)), Role: role, MaxConns: n})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		b      store.ConnectionBudget
		status Status
		says   []string
	}{
		{"fits", store.ConnectionBudget{MaxConnections: 100, Reserved: 3, Open: 30, OpenSiteops: 10, Processes: procs(20, 20)},
			OK, []string{"may open 40", "1 worker(s) [20], 1 ingress(s) [20]", "other clients have 20 open", "60 of the 97"}},
		{"make cluster's four processes beside Temporal", store.ConnectionBudget{MaxConnections: 100, Reserved: 3, Open: 50, OpenSiteops: 8, Processes: procs(20, 20, 20, 20)},
			Warn, []string{"may open 80", "other clients have 42 open", "122 of the 97", "too many clients already", "SITEOPS_DATABASE_MAX_CONNS"}},
		{"an older release's process counts at the default", store.ConnectionBudget{MaxConnections: 30, Reserved: 3, Open: 5, OpenSiteops: 5, Processes: procs(0, 10)},
			Warn, []string{"may open 30", "[20]", "30 of the 27"}},
		{"nothing registered", store.ConnectionBudget{MaxConnections: 100, Reserved: 3, Open: 4, OpenSiteops: 1},
			OK, []string{"no worker or ingress registered", "3 of the 97"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := connectionBudget(tc.b)
			if r.Status != tc.status || r.Check != "database connections" {
				t.Errorf("status %s (%s), want %s: %s", r.Status, r.Check, tc.status, r.Detail)
			}
			for _, s := range tc.says {
				if !strings.Contains(r.Detail, s) {
					t.Errorf("detail %q does not say %q", r.Detail, s)
				}
			}
		})
	}
}
