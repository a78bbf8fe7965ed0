package production

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/examples"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// scale is the size of the scale-out scenario: make test runs the short
// one, make soak (SITEOPS_SOAK=1) the full one of the issue.
type scale struct {
	onboardings int // besides the throughput phases
	sites       int // sites whose leads arrive as lead.created
	simLeads    int // leads per site, each a delivery from the simulator
	genEvents   int // signed lead.created from the load generator, to both ingresses
	// phase is the onboardings of each throughput phase (one worker, then
	// two), started at once: several times what completes in one
	// onboarding's latency, so that the phase measures a rate, not one
	// wave's latency.
	phase int
	// relayEvents is the events of each relay phase (one replica, then
	// two): several claims of relayClaim each, so that two replicas have
	// claims to share.
	relayEvents int
}

// relayClaim is how many bulk events one relay claim takes
// (relay.Options.BulkBatch's default).
const relayClaim = 500

func scenario() scale {
	if os.Getenv("SITEOPS_SOAK") != "" {
		return scale{onboardings: 100, sites: 50, simLeads: 200, genEvents: 10_000, phase: 100, relayEvents: 20 * relayClaim}
	}
	return scale{onboardings: 20, sites: 10, simLeads: 100, genEvents: 1_000, phase: 30, relayEvents: 4 * relayClaim}
}

const generatorSecret = "whsec_production_generator" //nolint:gosec // made up for the test

// TestScaleOut runs two workers and two ingress replicas of the siteops
// binary on one PostgreSQL store against the cluster: onboardings, lead
// events from the simulator (to one ingress) and from a signed load
// generator (to both), an embed incident and a secret rotation, while one
// worker and one ingress are SIGKILLed mid-run and restarted (and must
// serve again). Every onboarding must be published; no side effect doubled
// on the simulator; every accepted event dispatched exactly once across both
// relays (one recorded dispatch per event in the inbox's history, and each
// lead.created counted once by its lead sync); and the store's leads equal
// the simulator's. It also measures, in the same run, onboarding throughput
// with one worker against two, and relay dispatch with one ingress replica
// against two.
func TestScaleOut(t *testing.T) {
	world.Need(t)
	sc := scenario()
	sim, simURL := newSimulator(t, simulator.Config{Seed: 11, KnowledgeDelay: 2 * time.Second})
	dbURL := storetest.PostgresSchemaURL(t)
	queue := "scaleout"
	// Clipped, so that every append below copies instead of writing into
	// spare capacity that the slices of other processes share.
	common := slices.Clip(append(clusterEnv(),
		"SITEOPS_DATABASE_URL="+dbURL, "SITEOPS_SECRET_KEY="+secretKey(), "SITEOPS_TASK_QUEUE="+queue,
		"AGENTSITE_BASE_URL="+simURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_ALLOW_LOOPBACK_RECEIVERS=true",
		"SITEOPS_WEBHOOK_SECRETS="+generatorSecret, "SITEOPS_LOG_FORMAT=json", "SITEOPS_LOG_LEVEL=warn", "SITEOPS_OPERATOR=scaleout"))
	st, err := store.Open(t.Context(), dbURL, store.Options{SecretKey: storetest.TestKey})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	cl, err := temporal.Dial(t.Context(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := starter.New(starter.Options{Client: cl, Texts: st, TaskQueue: queue, Namespace: namespace})

	// Every process gets its own ports: the webhook and admin ports of
	// each ingress replica, the metrics port of each worker (two on one
	// host would share the defaults).
	ps, err := ports.FreeN(6)
	if err != nil {
		t.Fatal(err)
	}
	local := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	ingressURL := func(i int) string { return "http://" + local(ps[i]) }
	adminURL := func(i int) string { return "http://" + local(ps[2+i]) }
	workerURL := func(i int) string { return "http://" + local(ps[4+i]) }
	workerEnv := func(i int) []string {
		return slices.Concat(common, []string{"SITEOPS_METRICS_ADDR=" + local(ps[4+i])})
	}
	ingressEnv := func(i int) []string {
		return slices.Concat(common, []string{"SITEOPS_INGRESS_ADDR=" + local(ps[i]), "SITEOPS_INGRESS_ADMIN_ADDR=" + local(ps[2+i])})
	}

	// Relay dispatch, one replica against two, on events waiting in the
	// inbox, against the ceiling the cluster sets: the same calls with no
	// relay, as many in flight as two replicas have (16 each).
	relayQueue := queue + "-relay"
	relays := relayReplicas{
		env: func(i int) []string {
			return slices.Concat(ingressEnv(i), []string{"SITEOPS_TASK_QUEUE=" + relayQueue})
		},
		url: ingressURL, admin: adminURL,
	}
	relayOne := relayPhase(t, st, relays, 1, sc.relayEvents)
	relayTwo := relayPhase(t, st, relays, 2, sc.relayEvents)
	ceiling := signalCeiling(t, cl, relayQueue, sc.relayEvents/2, 32)
	t.Logf("THROUGHPUT relay (%d events, claims of %d): 1 replica %.0f events/s (%s), 2 replicas %.0f events/s (%s; dispatched %v); ratio %.2f; raw SignalWithStart ceiling %.0f calls/s (%d calls, 32 in flight)",
		relayOne.events, relayClaim, relayOne.rate, relayOne.took, relayTwo.rate, relayTwo.took, relayTwo.perReplica, relayTwo.rate/relayOne.rate,
		ceiling, sc.relayEvents/2)

	// Onboarding throughput, one worker against two, each after a warm-up
	// onboarding (the first poll of a new task queue, cold caches).
	w1 := startProc(t, "worker-1", workerEnv(0), "worker")
	onboardingPhase(t, s, "warm", 1)
	one := onboardingPhase(t, s, "one", sc.phase)
	w2 := startProc(t, "worker-2", workerEnv(1), "worker")
	onboardingPhase(t, s, "warm-2", 2)
	two := onboardingPhase(t, s, "two", sc.phase)
	t.Logf("THROUGHPUT onboardings (%d at once): 1 worker %.2f/s (%s, p50 %s, max %s), 2 workers %.2f/s (%s, p50 %s, max %s); ratio %.2f",
		sc.phase, one.rate, one.took, one.p50, one.max, two.rate, two.took, two.p50, two.max, two.rate/one.rate)

	// The mixed run.
	in1 := startProc(t, "ingress-1", ingressEnv(0), "ingress")
	in2 := startProc(t, "ingress-2", ingressEnv(1), "ingress")
	ready(t, ingressURL(0)+"/healthz")
	ready(t, ingressURL(1)+"/healthz")
	out, code := siteops(t, common, "webhook", "create", "--url", ingressURL(0)+"/webhooks/main", "--events",
		"lead.created,knowledge.ready,site.published,site.unpublished", "-o", "json", "--timeout", "2m")
	if code != 0 {
		t.Fatalf("webhook create: exit %d\n%s", code, out)
	}
	endpoint := jsonField(t, out, "endpoint_id")

	api, err := agentsite.NewClient(simURL, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	var leadSites []string
	for i := range sc.sites {
		cs, err := api.CreateSite(t.Context(), fmt.Sprintf("lead-site-%d", i), agentsite.NewSite{Title: "Leads", Slug: fmt.Sprintf("leads-%02d", i), Type: "business", Template: "minimal"})
		if err != nil {
			t.Fatal(err)
		}
		leadSites = append(leadSites, cs.Site.ID)
	}

	var wg sync.WaitGroup
	var onboarded atomic.Int32
	spec := loadSpec(t)
	for i := range sc.onboardings {
		wg.Go(func() {
			sp := spec
			sp.Site.Slug = fmt.Sprintf("mixed-%03d", i)
			p, problems := starter.Prepare(sp)
			if len(problems) > 0 {
				t.Error(problems)
				return
			}
			o, err := s.Onboard(t.Context(), p)
			if err != nil {
				t.Error(err)
				return
			}
			var res workflows.OnboardingResult
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			if err := s.Wait(ctx, o.Run, &res); err != nil {
				t.Errorf("%s: %v", o.WorkflowID, err)
				return
			}
			if res.Status == "published" {
				onboarded.Add(1)
			}
		})
	}
	wg.Go(func() {
		for _, site := range leadSites {
			if _, err := sim.CreateLeads(site, sc.simLeads); err != nil {
				t.Error(err)
			}
		}
	})
	var generated, sent atomic.Int32
	var generating atomic.Bool
	generating.Store(true)
	wg.Go(func() {
		defer generating.Store(false)
		generated.Store(int32(generate(t, []string{ingressURL(0), ingressURL(1)}, leadSites, sc.genEvents, &sent)))
	})

	// Mid-run: a worker and an ingress replica die and come back, each
	// with its own environment, and serve again: the ingress answers its
	// probes and accepts a delivery; the worker serves its metrics (and,
	// checked at the end, ran tasks after its restart). They die once the
	// generator is a third of the way through or half the onboardings have
	// published, whichever comes first, so the kill lands on work in
	// flight (checked below, not assumed).
	siteopstest.Eventually(t, 2*time.Minute, "the run a third of the way through", func() bool {
		return int(sent.Load()) >= sc.genEvents/3 || int(onboarded.Load()) >= sc.onboardings/2
	})
	w1.kill()
	in2.kill()
	if !generating.Load() {
		t.Errorf("the generator had finished before the kill; the kill did not land mid-run")
	}
	if got := int(onboarded.Load()); got == sc.onboardings {
		t.Errorf("all %d onboardings had finished before the kill; the kill did not land mid-run", got)
	}
	// Only an event leased and not yet recorded when the replica died can
	// be signalled twice: its successor signals it again once the lease
	// runs out. Leases of the surviving replica count too (an upper bound).
	leasedAtKill := count(t, dbURL, `SELECT COUNT(*) FROM inbox WHERE event_type = 'lead.created' AND dispatched_at IS NULL AND next_attempt_at > now()`)
	t.Logf("killed worker-1 and ingress-2 (SIGKILL); %d lead.created were leased and not yet recorded", leasedAtKill)
	time.Sleep(2 * time.Second) // stay down a while; nothing waits on this
	w1.start(t)
	in2.start(t)
	readyOrLog(t, ingressURL(1)+"/healthz", in2)
	readyOrLog(t, adminURL(1)+"/readyz", in2)
	readyOrLog(t, workerURL(0)+"/healthz", w1)
	if code := deliver(t, ingressURL(1), "evt_restart_probe", leadSites[0], "lead_restart_probe"); code != http.StatusOK {
		t.Errorf("the restarted ingress-2 answered a new delivery with %d, want 200\n%s", code, tail(in2.log.String(), 2000))
	}

	// An incident and a rotation while it all runs.
	incidentSite := leadSites[0]
	if out, code := siteops(t, common, "embed", "off", "--site", incidentSite, "--reason", "scale-out drill"); code != 0 {
		t.Errorf("embed off: exit %d\n%s", code, out)
	}
	if out, code := siteops(t, common, "embed", "on", "--site", incidentSite); code != 0 {
		t.Errorf("embed on: exit %d\n%s", code, out)
	}
	out, code = siteops(t, common, "secret", "rotate", "--endpoint", endpoint, "--url", ingressURL(1)+"/webhooks/main-v2", "--wait", "--verify-timeout", "2m", "--timeout", "3m")
	if code != 0 || !strings.Contains(out, "done") {
		t.Errorf("secret rotate: exit %d\n%s", code, out)
	}
	wg.Wait()

	if got := int(onboarded.Load()); got != sc.onboardings {
		t.Errorf("%d of %d onboardings published", got, sc.onboardings)
	}
	siteopstest.Eventually(t, 5*time.Minute, "every accepted event dispatched", func() bool {
		is, err := st.InboxStatus(t.Context())
		return err == nil && is.Undispatched == 0
	})
	siteopstest.Eventually(t, 5*time.Minute, "every lead sync caught up with the simulator", func() bool {
		for _, site := range leadSites {
			n, err := st.CountLeads(t.Context(), site)
			if err != nil || n != len(sim.LeadIDs(site)) {
				return false
			}
		}
		return true
	})
	for _, site := range leadSites {
		got, _ := st.LeadIDs(t.Context(), site)
		want := sim.LeadIDs(site)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("site %s: store holds %d leads, simulator %d", site, len(got), len(want))
		}
	}

	checkNoDoubledSideEffects(t, sim, spec, incidentSite)

	// Exactly once, as the store saw it: each event in the inbox has one
	// recorded dispatch (across both relays), none is a dead letter, and
	// every lead.created reached its lead sync.
	checked := checkDispatchedOnce(t, st.DB())

	// Exactly once, as the workflows saw it: every distinct lead.created
	// accepted was counted once by its sync. A query sees a workflow as of
	// its last completed task, so the count is read until the syncs have
	// processed every signal.
	accepted := distinctLeadEvents(t, dbURL)
	counted := 0
	deadline := time.Now().Add(time.Minute)
	for {
		counted = 0
		for _, site := range leadSites {
			p, err := s.LeadProgress(t.Context(), site)
			if err != nil {
				t.Fatal(err)
			}
			counted += p.Events
		}
		if counted == accepted || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // poll interval of the deadline loop above
	}
	duplicates := 0
	for _, site := range leadSites {
		p, _ := s.LeadProgress(t.Context(), site)
		duplicates += p.DuplicateEvents
	}
	t.Logf("inbox: %d events, each dispatched once; lead.created: %d distinct accepted (%d from the generator), %d counted once each by the lead syncs; %d signals repeated an event already counted",
		checked, accepted, generated.Load(), counted, duplicates)
	if counted != accepted {
		t.Errorf("the lead syncs counted %d distinct events, the inbox accepted %d", counted, accepted)
		for _, site := range leadSites {
			p, _ := s.LeadProgress(t.Context(), site)
			n := count(t, dbURL, fmt.Sprintf(`SELECT COUNT(*) FROM inbox WHERE event_type = 'lead.created' AND convert_from(body, 'UTF8')::json->'data'->>'site_id' = '%s'`, site))
			resp, _ := cl.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: "WorkflowId = '" + workflows.LeadSyncID(site) + "'"})
			var runs []string
			for _, e := range resp.GetExecutions() {
				runs = append(runs, e.GetStatus().String())
			}
			t.Logf("site %s: counted %d (%d duplicates, %d runs), accepted %d; runs %v", site, p.Events, p.DuplicateEvents, p.Runs, n, runs)
		}
	}
	// A repeated signal is harmless (the sync counts an event once), and
	// only the kill explains one: an event the dead replica had signalled
	// but not recorded. More repeats than events leased at the kill means
	// relays signal events twice in normal operation.
	if duplicates > leasedAtKill {
		t.Errorf("the lead syncs got %d repeated events, more than the %d lead.created leased when ingress-2 was killed: relays signal events twice in normal operation", duplicates, leasedAtKill)
	}

	// The restarted worker ran tasks after its restart: its counters start
	// at zero with the process.
	body := scrape(t, workerURL(0))
	if n := metricSum(body, "temporal_workflow_task_execution_latency_seconds_count") + metricSum(body, "temporal_activity_execution_latency_seconds_count"); n == 0 {
		t.Errorf("the restarted worker-1 ran no workflow task or activity after its restart\n%s", tail(w1.log.String(), 2000))
	}
	for _, p := range []*proc{w1, w2, in1, in2} {
		if strings.Contains(p.log.String(), apiKey) || strings.Contains(p.log.String(), "whsec_") || strings.Contains(p.log.String(), "PRIVATE KEY") {
			t.Errorf("%s logged a secret", p.name)
		}
	}
	for _, site := range leadSites {
		_ = cl.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
	}
}

// checkNoDoubledSideEffects checks the simulator for side effects done
// twice: one site per slug, each onboarded site with its sources and FAQs
// once, the incident's site PATCHed twice (off and on), and no idempotency
// key applied twice.
func checkNoDoubledSideEffects(t *testing.T, sim *simulator.Simulator, spec starter.Spec, incidentSite string) {
	t.Helper()
	bySlug := map[string]int{}
	for _, site := range sim.Sites() {
		bySlug[site.Slug]++
		onboarded := strings.HasPrefix(site.Slug, "mixed-") || strings.HasPrefix(site.Slug, "phase-")
		if onboarded && (site.Status != "published" || site.Knowledge != len(spec.Knowledge) || site.FAQs != len(spec.FAQs)) {
			t.Errorf("site %s: %+v; want published with %d sources and %d FAQs", site.Slug, site, len(spec.Knowledge), len(spec.FAQs))
		}
	}
	for slug, n := range bySlug {
		if n != 1 {
			t.Errorf("%d sites with slug %s", n, slug)
		}
	}
	patches := 0
	applied := map[string]int{}
	for _, r := range sim.Requests() {
		if r.Method == http.MethodPatch && strings.Contains(r.Path, incidentSite+"/agent") {
			patches++
		}
		if r.Method != http.MethodGet && r.IdempotencyKey != "" && !r.Replayed && r.Status >= 200 && r.Status < 300 {
			applied[r.Method+" "+r.Path+" "+r.IdempotencyKey]++
		}
	}
	if patches != 2 {
		t.Errorf("%d PATCHes of the incident's site, want 2 (off and on)", patches)
	}
	for req, n := range applied {
		if n > 1 {
			t.Errorf("%s applied %d times (not replayed); want once", req, n)
		}
	}
}

// generate sends n signed lead.created events, for leads the simulator
// already has, alternately to the ingresses, retrying each until a 2xx
// (a replica may be down). It returns how many were accepted as new.
func generate(t *testing.T, ingresses, sites []string, n int, sent *atomic.Int32) int {
	t.Helper()
	accepted := 0
	for i := range n {
		sent.Store(int32(i))
		id := fmt.Sprintf("evt_gen_%06d", i)
		for attempt := 0; ; attempt++ {
			code := deliver(t, ingresses[(i+attempt)%len(ingresses)], id, sites[i%len(sites)], fmt.Sprintf("lead_gen_%d", i))
			if code == http.StatusOK {
				accepted++
				break
			}
			if code == http.StatusNoContent {
				break
			}
			if attempt > 50 {
				t.Errorf("%s was never accepted", id)
				break
			}
			time.Sleep(100 * time.Millisecond) // back off before the other replica
		}
	}
	return accepted
}

// deliverClient sends the test's signed deliveries.
var deliverClient = &http.Client{Timeout: 10 * time.Second}

// deliver POSTs one lead.created event, signed with generatorSecret, to an
// ingress's /webhooks and returns the status (0 when the request failed).
func deliver(t *testing.T, ingress, id, site, lead string) int {
	t.Helper()
	return deliverEvent(t, ingress, id, "lead.created", fmt.Sprintf(`{"site_id":%q,"lead_id":%q}`, site, lead))
}

// deliverEvent POSTs one event of type typ with the JSON data, signed with
// generatorSecret, to an ingress's /webhooks and returns the status (0
// when the request failed).
func deliverEvent(t *testing.T, ingress, id, typ, data string) int {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":%q,"created_at":"2026-11-22T09:00:00.000Z","data":%s}`, id, typ, data)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ingress+"/webhooks", strings.NewReader(body))
	if err != nil {
		t.Error(err) // it may run in a goroutine of its own, where Fatal must not
		return 0
	}
	req.Header.Set("svc-event-id", id)
	req.Header.Set("svc-event-type", typ)
	req.Header.Set("svc-signature", webhook.Sign(generatorSecret, time.Now(), []byte(body)))
	resp, err := deliverClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// distinctLeadEvents counts the lead.created events the inbox accepted.
func distinctLeadEvents(t *testing.T, dbURL string) int {
	t.Helper()
	return count(t, dbURL, `SELECT COUNT(*) FROM inbox WHERE event_type = 'lead.created' AND event_id NOT LIKE 'evt_relay_%'`)
}

func count(t *testing.T, dbURL, q string) int {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var n int
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func loadSpec(t *testing.T) starter.Spec {
	t.Helper()
	spec, err := starter.LoadSpecFS(examples.FS, "bayside-dental.json")
	if err != nil {
		t.Fatal(err)
	}
	spec.WaitForKnowledge = false
	return spec
}

func jsonField(t *testing.T, out, field string) string {
	t.Helper()
	i := strings.Index(out, `"`+field+`": "`)
	if i < 0 {
		t.Fatalf("no %s in %s", field, out)
	}
	rest := out[i+len(field)+5:]
	return rest[:strings.IndexByte(rest, '"')]
}

func secretKey() string { return base64.StdEncoding.EncodeToString(storetest.TestKey) }
