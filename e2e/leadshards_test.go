package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/nexus/api"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// TestLeadShardsSyncTheEventsOfManySites: with SITEOPS_LEAD_SHARDS the
// lead.created deliveries of many sites, through the ingress and its
// relay, reach the store through the lead event shards alone, with no
// lead sync per site; each site's progress (the Nexus lead-sync-status
// answer) counts its events once, and a lead whose delivery never came is
// found by the lead sweep, which asks the shard that synced the site.
func TestLeadShardsSyncTheEventsOfManySites(t *testing.T) {
	const (
		shards = 2
		sites  = 6
		every  = 5 * time.Second
	)
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.StartWorker(t, testenv.WorkerOptions{LeadSweepEvery: every})
	in := e.StartIngress(t, testenv.IngressOptions{LeadShards: shards})
	endpoint := e.register(t, &ingressRun{Ingress: in, url: in.URL}, "/webhooks/main", "lead.created")
	ids := make([]string, sites)
	for i := range ids {
		ids[i] = e.site(t, fmt.Sprintf("shard-site-%d", i))
		if _, err := e.Sim.CreateLeads(ids[i], 5+i); err != nil {
			t.Fatal(err)
		}
	}
	for _, site := range ids {
		siteopstest.Eventually(t, time.Minute, "site "+site+"'s leads in the store", func() bool {
			n, _ := e.Store.CountLeads(t.Context(), site)
			return n == len(e.Sim.LeadIDs(site))
		})
		assertStoreEqualsSim(t, e, site)
		want := len(e.Sim.LeadIDs(site))
		siteopstest.Eventually(t, 30*time.Second, "site "+site+"'s progress to count its events", func() bool {
			p, err := e.Starter.LeadProgress(t.Context(), site)
			return err == nil && p.Events == want && p.DuplicateEvents == 0 && p.CaughtUp && p.Leads == want
		})
		var nf *serviceerror.NotFound
		if _, err := e.Client.DescribeWorkflow(t.Context(), workflows.LeadSyncID(site), ""); !errors.As(err, &nf) {
			t.Errorf("site %s has a lead sync of its own (%v); with shards its events go to its shard alone", site, err)
		}
	}
	// The Nexus operation answers the same for a site without a lead sync
	// of its own.
	endpointName, _ := createEndpoint(t, e.Address, e.Namespace)
	var viaNexus api.LeadSyncProgress
	if err := newCaller(t, e.Address).call(t, endpointName, api.LeadSyncStatusName, api.LeadSyncStatusInput{SiteID: ids[1]}, &viaNexus); err != nil {
		t.Fatalf("lead-sync-status of %s: %v", ids[1], err)
	}
	if want := len(e.Sim.LeadIDs(ids[1])); viaNexus.Events != want || viaNexus.Leads != want || !viaNexus.CaughtUp {
		t.Errorf("lead-sync-status of %s = %+v; want its %d events and leads, caught up", ids[1], viaNexus, want)
	}
	// No more workflows than shards carried every site's events.
	for k := range shards {
		if _, err := e.Client.DescribeWorkflow(t.Context(), workflows.LeadEventsKind.ID(fmt.Sprint(k)), ""); err != nil {
			t.Logf("shard %d: %v (no site of the test fell in it)", k, err)
		}
	}

	// A lead whose lead.created delivery never comes: the sweep finds it
	// and asks the shard that synced the site.
	lost := ids[0]
	if err := e.api(t).DeleteWebhookEndpoint(t.Context(), "shards-delete", endpoint); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sim.CreateLeads(lost, 3); err != nil {
		t.Fatal(err)
	}
	want := len(e.Sim.LeadIDs(lost))
	siteopstest.Eventually(t, 6*every+30*time.Second, "the sweep to find the lead whose delivery never came", func() bool {
		n, _ := e.Store.CountLeads(t.Context(), lost)
		return n == want
	})
	assertStoreEqualsSim(t, e, lost)
	shard := workflows.LeadEventsKind.ID(workflows.LeadShardKey(lost, shards))
	for _, site := range ids {
		_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadEventsKind.ID(workflows.LeadShardKey(site, shards)), "")
	}
	_ = e.Client.GetWorkflow(t.Context(), shard, "").Get(t.Context(), nil)
	recordHistory(t, e, shard, "lead_events")
}
