package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry/telemetrytest"
	"github.com/siteops/siteops/workflows"
)

// ingressRun is the webhook ingress of one test, with its relay, run as
// `siteops ingress` runs it (testenv.Env.StartIngress); url is its
// webhook port's.
type ingressRun struct {
	*testenv.Ingress
	url string
}

func (e *env) startIngress(t *testing.T) *ingressRun {
	t.Helper()
	return e.startIngressWith(t)
}

// register creates a webhook endpoint on the simulator pointing at the
// ingress and stores its secret, through the EndpointRegistration workflow
// (the worker must run).
func (e *env) register(t *testing.T, in *ingressRun, path string, events ...string) string {
	t.Helper()
	reg, err := e.Starter.RegisterEndpoint(ctxWithin(t, time.Minute), starter.EndpointRequest{URL: in.url + path, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return reg.Status.EndpointID
}

func (e *env) site(t *testing.T, slug string) string {
	t.Helper()
	api, _ := agentsite.NewClient(e.SimURL, apiKey)
	cs, err := api.CreateSite(t.Context(), "site-"+slug, agentsite.NewSite{Title: slug, Slug: slug, Type: "business", Template: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	return cs.Site.ID
}

func TestLeadCreatedWakesTheLeadSync(t *testing.T) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			e := newEnv(t, d, simulator.Config{})
			e.startWorker(t)
			in := e.startIngress(t)
			e.register(t, in, "/webhooks/main", "lead.created")
			site := e.site(t, "acme")
			if _, err := e.Sim.CreateLeads(site, 50); err != nil {
				t.Fatal(err)
			}
			siteopstest.Eventually(t, time.Minute, "the webhooks to bring all 50 leads into the store", func() bool {
				n, _ := e.Store.CountLeads(t.Context(), site)
				return n == 50
			})
			siteopstest.Eventually(t, 30*time.Second, "every event dispatched", func() bool {
				st, _ := e.Store.InboxStatus(t.Context())
				return st.Undispatched == 0 && st.Total >= 50
			})
			// The relay counts a batch just after it records it: the
			// inbox can show it dispatched a moment before the metric
			// does, so read it until it settles.
			signalled := func() float64 {
				return telemetrytest.ValueIn(t, in.Metrics(t), "siteops_relay_dispatched_total", "type", "lead.created", "outcome", store.OutcomeSignalled)
			}
			deadline := time.Now().Add(5 * time.Second)
			for signalled() < 50 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := signalled(); n != 50 {
				t.Errorf("%v lead.created events signalled, want 50", n)
			}
			siteopstest.Eventually(t, 30*time.Second, "the lead sync to count 50 events", func() bool {
				p, err := e.Starter.LeadProgress(t.Context(), site)
				return err == nil && p.Events == 50 && p.DuplicateEvents == 0
			})
			assertStoreEqualsSim(t, e, site)
			_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
		})
	}
}

func TestDuplicateAndReorderedDeliveriesHaveOneEffectEach(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{
		KnowledgeDelay: 2 * time.Second, // 20 ms at the test's time scale
		Faults:         simulator.Faults{DuplicateRate: 1, ReorderWindow: simulator.Duration(20 * time.Second)},
	})
	e.startWorker(t)
	in := e.startIngress(t)
	e.register(t, in, "/webhooks/main", "lead.created", "knowledge.ready", "site.published")

	p := prepare(t, "../examples/acme-anvils.yaml", "acme-anvils")
	p.Input.WaitForKnowledge = true
	p.Input.KnowledgeTimeout = workflows.Duration(time.Minute)
	res := e.onboard(t, p, time.Minute)
	if res.Status != "published" || res.KnowledgeReady != 2 || res.KnowledgeTimedOut {
		t.Errorf("result = %+v", res)
	}
	if _, err := e.Sim.CreateLeads(res.SiteID, 40); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, time.Minute, "all leads in the store", func() bool {
		n, _ := e.Store.CountLeads(t.Context(), res.SiteID)
		return n == 40
	})
	// Every event was delivered twice, out of order; each was recorded once.
	emitted := 0
	for _, ev := range e.Sim.Events() {
		if ev.Type == webhook.LeadCreated || ev.Type == webhook.KnowledgeReady || ev.Type == webhook.SitePublished {
			emitted++
		}
	}
	// A copy may be counted as a duplicate a moment before the first is
	// counted as accepted: wait for both counts.
	siteopstest.EventuallyNil(t, 30*time.Second, "both copies of every event", func() error {
		m := in.Metrics(t)
		accepted := telemetrytest.ValueIn(t, m, "siteops_webhook_deliveries_total", "outcome", "accepted")
		duplicate := telemetrytest.ValueIn(t, m, "siteops_webhook_deliveries_total", "outcome", "duplicate")
		if accepted != float64(emitted) || duplicate != float64(emitted) {
			return fmt.Errorf("%v events accepted and %v duplicates, %d emitted", accepted, duplicate, emitted)
		}
		return nil
	})
	siteopstest.Eventually(t, 30*time.Second, "the lead sync to see every event once", func() bool {
		pr, err := e.Starter.LeadProgress(t.Context(), res.SiteID)
		return err == nil && pr.Events == 40 && pr.DuplicateEvents == 0
	})
	assertStoreEqualsSim(t, e, res.SiteID)
	st, _ := e.Starter.Status(t.Context(), "onboarding/acme-anvils")
	t.Logf("onboarding status after the events: %+v", st.Detail)
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(res.SiteID), "")
}

func TestRotationUnderContinuousDeliveries(t *testing.T) {
	e := newEnv(t, store.Postgres, simulator.Config{})
	e.startWorker(t)
	in := e.startIngress(t)
	old := e.register(t, in, "/webhooks/v1", "lead.created")
	site := e.site(t, "rotating")

	// A continuous stream of leads, bounded in count and time.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 6000; i++ { // until the rotation is over; a minute at most
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := e.Sim.CreateLeads(site, 1); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	// flowing is a poll for 20 lead.created deliveries to endpoint since a
	// time: the stream reaching it, not a time that passed.
	flowing := func(what, endpoint string, since time.Time) {
		t.Helper()
		siteopstest.EventuallyNil(t, 30*time.Second, "20 deliveries on "+what, func() error {
			n := 0
			for _, d := range e.Sim.Deliveries() {
				if d.EndpointID == endpoint && d.Outcome == "succeeded" && d.At.After(since) {
					n++
				}
			}
			if n < 20 {
				return fmt.Errorf("%d deliveries on %s", n, endpoint)
			}
			return nil
		})
	}
	flowing("the old endpoint before the rotation", old, time.Time{})
	run, err := e.Starter.RotateSecret(t.Context(), starter.RotationRequest{OldEndpointID: old, NewURL: in.url + "/webhooks/v2", VerifyTimeout: time.Minute, GracePeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.SecretRotationStatus
	if err := e.Starter.Wait(ctxWithin(t, time.Minute), run, &st); err != nil {
		t.Fatal(err)
	}
	if st.Step == workflows.RotationDone {
		flowing("the new endpoint after the rotation", st.NewEndpointID, time.Now())
	}
	close(stop)
	wg.Wait()
	if st.Step != workflows.RotationDone || st.VerifiedEventID == "" {
		t.Fatalf("rotation = %+v", st)
	}
	recordHistory(t, e, workflows.SecretRotationID(old), "secret_rotation")

	// Every lead.created event emitted reached the inbox, and no valid
	// delivery was refused.
	var want []string
	for _, ev := range e.Sim.Events() {
		if ev.Type == webhook.LeadCreated {
			want = append(want, ev.ID)
		}
	}
	// The inbox's total counts the endpoints' verified records too, and
	// the simulator delivers the last events after they were made: wait
	// for each event by its id.
	siteopstest.EventuallyNil(t, 30*time.Second, "every event in the inbox and dispatched", func() error {
		for _, id := range want {
			if _, _, err := e.Store.InboxOutcome(t.Context(), id); err != nil {
				return fmt.Errorf("event %s was lost: %w", id, err)
			}
		}
		s, err := e.Store.InboxStatus(t.Context())
		if err != nil {
			return err
		}
		if s.Undispatched != 0 {
			return fmt.Errorf("%d events not dispatched", s.Undispatched)
		}
		return nil
	})
	for _, reason := range []string{"invalid_signature", "timestamp_outside_window", "unknown_receiver", "malformed_signature_header"} {
		if n := telemetrytest.ValueIn(t, in.Metrics(t), "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", reason); n != 0 {
			t.Errorf("%v deliveries rejected for %s", n, reason)
		}
	}
	for _, d := range e.Sim.Deliveries() {
		if d.Outcome != "succeeded" {
			t.Errorf("a delivery failed: %+v", d)
			break
		}
	}
	// The old endpoint is gone, the new one delivers.
	api, _ := agentsite.NewClient(e.SimURL, apiKey)
	eps, err := api.ListWebhookEndpoints(t.Context())
	if err != nil || len(eps) != 1 || eps[0].ID != st.NewEndpointID || !strings.HasSuffix(eps[0].URL, "/webhooks/v2") {
		t.Errorf("endpoints after the rotation = %+v, %v", eps, err)
	}
	t.Logf("rotation verified by %s; %d lead.created events, all recorded", st.VerifiedEventID, len(want))
	siteopstest.Eventually(t, time.Minute, "the store to hold every lead", func() bool {
		ids, _ := e.Store.LeadIDs(t.Context(), site)
		simIDs := e.Sim.LeadIDs(site)
		slices.Sort(simIDs)
		return slices.Equal(ids, simIDs)
	})
	_ = e.Client.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
}
