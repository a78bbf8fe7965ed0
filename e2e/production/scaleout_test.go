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
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/examples"
	"github.com/siteops/siteops/internal/ports"
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
	phase       int // onboardings per throughput phase
	relayEvents int // events per relay phase
}

func scenario() scale {
	if os.Getenv("SITEOPS_SOAK") != "" {
		return scale{onboardings: 100, sites: 50, simLeads: 200, genEvents: 10_000, phase: 40, relayEvents: 5000}
	}
	return scale{onboardings: 20, sites: 10, simLeads: 100, genEvents: 1_000, phase: 10, relayEvents: 500}
}

const generatorSecret = "whsec_production_generator" //nolint:gosec // made up for the test

// TestScaleOut runs two workers and two ingress replicas of the siteops
// binary on one PostgreSQL store against the cluster: onboardings, lead
// events from the simulator (to one ingress) and from a signed load
// generator (to both), an embed incident and a secret rotation, while one
// worker and one ingress are SIGKILLed mid-run and restarted. Every
// onboarding must be published, no side effect doubled on the simulator,
// every accepted event dispatched and counted once by its workflow, and the
// store's leads equal the simulator's. It also measures, in the same run,
// onboarding throughput with one worker against two, and relay dispatch
// with one ingress replica against two.
func TestScaleOut(t *testing.T) {
	need(t)
	sc := scenario()
	sim, simURL := newSimulator(t, simulator.Config{Seed: 11, KnowledgeDelay: 2 * time.Second})
	dbURL := storetest.PostgresSchemaURL(t)
	queue := "scaleout"
	common := append(clusterEnv(),
		"SITEOPS_DATABASE_URL="+dbURL, "SITEOPS_SECRET_KEY="+secretKey(), "SITEOPS_TASK_QUEUE="+queue,
		"AGENTSITE_BASE_URL="+simURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_ALLOW_LOOPBACK_RECEIVERS=true",
		"SITEOPS_WEBHOOK_SECRETS="+generatorSecret, "SITEOPS_LOG_FORMAT=json", "SITEOPS_LOG_LEVEL=warn", "SITEOPS_OPERATOR=scaleout")
	st, err := store.Open(t.Context(), dbURL, store.WithSecretKey(storetest.TestKey))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	cl, err := temporal.Dial(t.Context(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := &starter.Starter{Client: cl, Texts: st, TaskQueue: queue, Namespace: namespace}

	workerEnv := func(i int) []string { return append(common, "SITEOPS_METRICS_ADDR=") }
	ingressAddrs, err := ports.FreeN(2)
	if err != nil {
		t.Fatal(err)
	}
	ingressURL := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", ingressAddrs[i]) }
	ingressEnv := func(i int) []string {
		// No admin address: two replicas on one host would share its default.
		return append(common, fmt.Sprintf("SITEOPS_INGRESS_ADDR=127.0.0.1:%d", ingressAddrs[i]), "SITEOPS_INGRESS_ADMIN_ADDR=")
	}

	// Relay dispatch, one replica against two, on events waiting in the
	// inbox (no ingress running while it fills, no worker running at all:
	// the lead syncs the events start are terminated after).
	relayOne := relayPhase(t, st, cl, ingressEnv, ingressURL, 1, sc.relayEvents)
	relayTwo := relayPhase(t, st, cl, ingressEnv, ingressURL, 2, sc.relayEvents)
	t.Logf("THROUGHPUT relay: 1 replica %.0f events/s, 2 replicas %.0f events/s; ratio %.2f", relayOne, relayTwo, relayTwo/relayOne)

	// Onboarding throughput, one worker against two, each after a warm-up
	// onboarding (the first poll of a new task queue, cold caches).
	w1 := startProc(t, "worker-1", workerEnv(1), "worker")
	onboardingPhase(t, s, "warm", 1)
	one := onboardingPhase(t, s, "one", sc.phase)
	w2 := startProc(t, "worker-2", workerEnv(2), "worker")
	onboardingPhase(t, s, "warm-2", 2)
	two := onboardingPhase(t, s, "two", sc.phase)
	t.Logf("THROUGHPUT onboardings: 1 worker %.2f/s (p50 %s), 2 workers %.2f/s (p50 %s); ratio %.2f",
		one.rate, one.p50, two.rate, two.p50, two.rate/one.rate)

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
	var generated atomic.Int32
	wg.Go(func() {
		generated.Store(int32(generate(t, []string{ingressURL(0), ingressURL(1)}, leadSites, sc.genEvents)))
	})

	// Mid-run: a worker and an ingress replica die and come back.
	time.Sleep(2 * time.Second)
	w1.kill()
	in2.kill()
	t.Logf("killed worker-1 and ingress-2 (SIGKILL)")
	time.Sleep(2 * time.Second)
	w1.start(t)
	in2.start(t)
	ready(t, ingressURL(1)+"/healthz")

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

	// Every lead of every site is a delivery from the simulator; keep one
	// coming until the rotation's new endpoint carries them (done above).
	if got := int(onboarded.Load()); got != sc.onboardings {
		t.Errorf("%d of %d onboardings published", got, sc.onboardings)
	}
	eventually(t, 5*time.Minute, "every accepted event dispatched", func() bool {
		is, err := st.InboxStatus(t.Context())
		return err == nil && is.Undispatched == 0
	})
	eventually(t, 5*time.Minute, "every lead sync caught up with the simulator", func() bool {
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

	// No side effect doubled: one site per slug, each with its sources and
	// FAQs once; the incident PATCHed twice.
	bySlug := map[string]int{}
	for _, site := range sim.Sites() {
		bySlug[site.Slug]++
		if strings.HasPrefix(site.Slug, "mixed-") && (site.Status != "published" || site.Knowledge != len(spec.Knowledge) || site.FAQs != len(spec.FAQs)) {
			t.Errorf("site %s: %+v", site.Slug, site)
		}
	}
	for slug, n := range bySlug {
		if n != 1 {
			t.Errorf("%d sites with slug %s", n, slug)
		}
	}
	patches := 0
	for _, r := range sim.Requests() {
		if r.Method == http.MethodPatch && strings.Contains(r.Path, incidentSite+"/agent") {
			patches++
		}
	}
	if patches != 2 {
		t.Errorf("%d PATCHes of the incident's site, want 2 (off and on)", patches)
	}

	// Every distinct lead.created accepted was counted once by its sync. A
	// query sees a workflow as of its last completed task, so the count is
	// read until the syncs have processed every signal.
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
		time.Sleep(200 * time.Millisecond)
	}
	duplicates := 0
	for _, site := range leadSites {
		p, _ := s.LeadProgress(t.Context(), site)
		duplicates += p.DuplicateEvents
	}
	t.Logf("lead.created: %d distinct accepted (%d from the generator), %d counted once each by the lead syncs; %d signals repeated an event already counted (leases of the killed replica taken over)",
		accepted, generated.Load(), counted, duplicates)
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
	for _, p := range []*proc{w1, w2, in1, in2} {
		if strings.Contains(p.log.String(), apiKey) || strings.Contains(p.log.String(), "whsec_") || strings.Contains(p.log.String(), "PRIVATE KEY") {
			t.Errorf("%s logged a secret", p.name)
		}
	}
	for _, site := range leadSites {
		_ = cl.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")
	}
}

type phaseResult struct {
	rate float64
	p50  time.Duration
}

// onboardingPhase runs n onboardings at once and returns their rate and
// median latency.
func onboardingPhase(t *testing.T, s *starter.Starter, name string, n int) phaseResult {
	t.Helper()
	spec := loadSpec(t)
	lat := make([]time.Duration, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sp := spec
			sp.Site.Slug = fmt.Sprintf("phase-%s-%03d", name, i)
			p, _ := starter.Prepare(sp)
			t0 := time.Now()
			o, err := s.Onboard(t.Context(), p)
			if err != nil {
				t.Error(err)
				return
			}
			if err := s.Wait(t.Context(), o.Run, nil); err != nil {
				t.Error(err)
			}
			lat[i] = time.Since(t0)
		})
	}
	wg.Wait()
	took := time.Since(start)
	slices.Sort(lat)
	return phaseResult{rate: float64(n) / took.Seconds(), p50: lat[n/2].Round(time.Millisecond)}
}

// relayPhase starts replicas ingress processes on an empty inbox, then
// commits n lead.created events (for n sites, so that none share a signal)
// in one transaction and returns the rate at which the relays empty the
// inbox. It terminates the lead syncs the events started.
func relayPhase(t *testing.T, st *store.Store, cl client.Client, env func(int) []string, url func(int) string, replicas, n int) float64 {
	t.Helper()
	var procs []*proc
	for i := range replicas {
		procs = append(procs, startProc(t, fmt.Sprintf("relay-%d", i), env(i), "ingress"))
		ready(t, url(i)+"/healthz")
	}
	run := time.Now().UnixNano()
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("evt_relay_%d_%06d", run, i)
		body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_r%d_%06d","lead_id":"lead_1"}}`, id, run, i)
		if _, err := tx.ExecContext(t.Context(), `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, next_attempt_at)
			VALUES ($1, 'lead.created', 'webhook', $2, '', 'env', now(), $3, now())`, id, int(store.LaneBulk), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, 5*time.Minute, "the relays to empty the inbox", func() bool {
		is, err := st.InboxStatus(t.Context())
		return err == nil && is.Undispatched == 0
	})
	took := time.Since(start)
	for _, p := range procs {
		p.stop()
	}
	// The workflows the events started are not part of the scenario.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = cl.TerminateWorkflow(context.Background(), workflows.LeadSyncID(fmt.Sprintf("site_r%d_%06d", run, i)), "", "relay phase over")
		})
	}
	wg.Wait()
	return float64(n) / took.Seconds()
}

// generate sends n signed lead.created events, for leads the simulator
// already has, alternately to the ingresses, retrying each until a 2xx
// (a replica may be down). It returns how many were accepted as new.
func generate(t *testing.T, ingresses, sites []string, n int) int {
	t.Helper()
	accepted := 0
	hc := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		id := fmt.Sprintf("evt_gen_%06d", i)
		body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":%q,"lead_id":"lead_gen_%d"}}`, id, sites[i%len(sites)], i)
		for attempt := 0; ; attempt++ {
			url := ingresses[(i+attempt)%len(ingresses)] + "/webhooks"
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("svc-event-id", id)
			req.Header.Set("svc-event-type", "lead.created")
			req.Header.Set("svc-signature", webhook.Sign(generatorSecret, time.Now(), []byte(body)))
			resp, err := hc.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					accepted++
					break
				}
				if resp.StatusCode == http.StatusNoContent {
					break
				}
			}
			if attempt > 50 {
				t.Errorf("%s was never accepted", id)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return accepted
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
