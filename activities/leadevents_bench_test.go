package activities

import (
	"fmt"
	"log/slog"
	"testing"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// BenchmarkSyncSite is one site's part of a lead event shard's sync
// (syncSite) for one new lead, on a site of 100 leads (half a page, as in
// BenchmarkCapacityCosts): the page read again, the new lead stored with
// the position, the site's record. The simulator runs in this process:
// read a CPU profile by function (-cpuprofile).
func BenchmarkSyncSite(b *testing.B) {
	sim, api, site := simSite(b, 100)
	acts := New(Options{API: api, Store: storetest.Open(b, store.Postgres)})
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	run := func(in SyncSiteLeadsInput) SyncSiteLeadsResult {
		v, err := env.ExecuteActivity(acts.SyncSiteLeads, in)
		if err != nil {
			b.Fatal(err)
		}
		var res SyncSiteLeadsResult
		if err := v.Get(&res); err != nil {
			b.Fatal(err)
		}
		return res
	}
	in := SyncSiteLeadsInput{Limit: 200, MaxPages: 10, Sites: []SiteLeadEvents{{SiteID: site, Events: 1}}}
	if res := run(SyncSiteLeadsInput{Key: "warm", Limit: 200, Sites: in.Sites}); res.Synced != 1 {
		b.Fatalf("warm-up sync: %+v", res)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		if _, err := sim.CreateLeads(site, 1); err != nil {
			b.Fatal(err)
		}
		in.Key, in.Order = fmt.Sprintf("sync-%d", i), int64(i+1)
		b.StartTimer()
		if res := run(in); res.Synced != 1 || res.New != 1 {
			b.Fatalf("sync %d: %+v", i, res)
		}
	}
}
