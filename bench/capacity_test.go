package bench

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/examples"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// Sizes of BenchmarkCapacityCosts; the environment variables in
// parentheses lower or raise them.
const (
	capOnboardings = 24   // onboardings measured (SITEOPS_BENCH_CAP_ONBOARDINGS)
	capLeadSites   = 400  // sites the lead.created events go to (SITEOPS_BENCH_CAP_SITES)
	capLeadEvents  = 2000 // SITEOPS_BENCH_CAP_EVENTS
	capLeadRate    = 40   // lead.created deliveries per second (SITEOPS_BENCH_CAP_LEAD_RATE)
	capIdleSites   = 50   // idle lead syncs polling every capIdlePoll
	// capLeadPrefill is how many leads each site of the lead.created
	// events has before its lead sync starts (SITEOPS_BENCH_CAP_PREFILL,
	// 0 to 199): half a page of 200. A sync resumes from the cursor of
	// the last page it read, so it reads that page again and upserts its
	// leads again with the new one; a site that takes leads for long has
	// on average half a page there.
	capLeadPrefill = 100
	// capIdlePoll is the shortest poll interval a lead sync accepts
	// (workflows.MinPollInterval): the cost of a wake-up does not depend
	// on it, only how many the window holds.
	capIdlePoll   = workflows.MinPollInterval
	capIdleWindow = 2*capIdlePoll + 10*time.Second
	capSweepSites = 200              // idle lead syncs, without a poll interval, one sweep checks (SITEOPS_BENCH_CAP_SWEEP_SITES)
	capMixedFor   = 60 * time.Second // SITEOPS_BENCH_CAP_MIXED_S
	capMixedOnbPS = 1                // onboardings per second in the mixed check (SITEOPS_BENCH_CAP_ONB_RATE)
)

// BenchmarkCapacityCosts measures the unit costs docs/sizing.md's capacity
// model is built from (issue 22, item 6), on a `siteops worker` process
// and a `siteops ingress` process (HTTP server, inbox, relay) built from
// this tree, on one PostgreSQL store, with the simulator over HTTP in this
// process, against the dev server or the cluster of SITEOPS_BENCH_CLUSTER:
//
//   - baseline: 15 s with nothing to do, per second (the worker's pollers,
//     the relay's idle claims and gauges): the processes' standing cost,
//     left out of the unit costs below and added to the mixed check's
//     prediction;
//   - onboarding: onboardings through starter.Onboard to a published site,
//     eight at a time;
//   - lead-event: signed lead.created deliveries at a fixed rate to the
//     ingress, each for a lead the simulator has, round robin over 400
//     sites of 100 leads each (half a page: see capLeadPrefill) whose
//     lead syncs run (so that no two events of a site fall in the relay's
//     1 s coalescing: the regime of 100,000 sites), each relayed into its
//     site's lead sync, which syncs the lead into the store;
//   - idle-lead-sync: lead syncs with nothing to do, polling every minute
//     (the shortest a lead sync accepts) instead of 5 minutes, so that
//     their wake-ups (timer fired, one SyncLeads that finds nothing new)
//     can be counted in 130 s;
//   - lead-sweep: lead syncs started without a poll interval (the
//     default), caught up, then one LeadSweep run over every site with a
//     position, as its schedule starts it: the sweep's cost per site
//     checked, the idle syncs' own (none: no timer), and what an idle
//     site costs a day at the default hourly sweep (actions/day/idle-site);
//   - mixed: the check of the model at one point: onboardings and
//     lead.created deliveries together at known rates for 60 s, the worker's
//     CPU time and the store's row writes measured against what the unit
//     costs above predict for them (measured-over-predicted, goal within
//     0.75–1.25).
//
// Per unit it reports the worker process's and the ingress process's CPU
// time (worker-cpu-ms, ingress-cpu-ms), the
// CPU time of the worker's and the ingress's PostgreSQL backends
// (worker-pg-cpu-ms, ingress-pg-cpu-ms), this process's (self-cpu-ms:
// simulator, starter, load), the Temporal server's
// (server-cpu-ms), the rows the store's tables took (store-rows: inserts,
// updates and deletes, from pg_stat_user_tables of the store's schema),
// the transactions committed in the store's database (commits, reads
// included; pg_stat_database), the growth of its tables with their indexes
// (store-growth-B: 8 KiB pages, so meaningful over many units), the WAL the PostgreSQL server wrote
// (wal-B: every database on it, the cluster's own persistence included
// when it runs on the same server), and from the workflows' histories the
// Temporal Cloud actions (actions; see historyActions for the rule), the
// history events and the history bytes (the events' protobuf size).
// SITEOPS_BENCH_CAP_CACHE sets the worker's sticky cache
// (SITEOPS_WORKFLOW_CACHE_SIZE): small, it measures a lead sync's task on
// a worker that has evicted it and replays its history. Use -benchtime 1x.
func BenchmarkCapacityCosts(b *testing.B) {
	r := newCapacityRig(b)
	var onb, lead, idle, sweep unitCost
	b.Run("baseline", func(b *testing.B) {
		scenario(b)
		for range b.N {
			r.base = r.measureBaseline(b, 15*time.Second)
			r.base.report(b, "s")
		}
	})
	b.Run("onboarding", func(b *testing.B) {
		scenario(b)
		for range b.N {
			onb = r.measureOnboardings(b, capSize(b, "SITEOPS_BENCH_CAP_ONBOARDINGS", 200, capOnboardings))
			onb.report(b, "onboarding")
		}
	})
	b.Run("lead-event", func(b *testing.B) {
		scenario(b)
		for range b.N {
			sites := capSize(b, "SITEOPS_BENCH_CAP_SITES", 2000, capLeadSites)
			rate := capSize(b, "SITEOPS_BENCH_CAP_LEAD_RATE", 1000, capLeadRate)
			events := capSize(b, "SITEOPS_BENCH_CAP_EVENTS", 20000, capLeadEvents)
			lead = r.measureLeadEvents(b, sites, events, rate)
			lead.report(b, "event")
		}
	})
	b.Run("idle-lead-sync", func(b *testing.B) {
		scenario(b)
		for range b.N {
			idle = r.measureIdle(b, capIdleSites, capIdlePoll, capIdleWindow)
			idle.report(b, "wake-up")
		}
	})
	b.Run("lead-sweep", func(b *testing.B) {
		scenario(b)
		for range b.N {
			sweep = r.measureSweep(b, capSize(b, "SITEOPS_BENCH_CAP_SWEEP_SITES", 5000, capSweepSites))
			sweep.report(b, "site")
		}
	})
	b.Run("mixed", func(b *testing.B) {
		scenario(b)
		if onb.units == 0 || lead.units == 0 || r.base.units == 0 {
			b.Skip("the mixed check needs the baseline, onboarding and lead-event costs of the same run")
		}
		for range b.N {
			onbRate := capSize(b, "SITEOPS_BENCH_CAP_ONB_RATE", 10, capMixedOnbPS)
			leadRate := capSize(b, "SITEOPS_BENCH_CAP_LEAD_RATE", 1000, capLeadRate)
			secs := capSize(b, "SITEOPS_BENCH_CAP_MIXED_S", 600, int(capMixedFor/time.Second))
			sites := capSize(b, "SITEOPS_BENCH_CAP_SITES", 2000, capLeadSites)
			r.measureMixed(b, onb, lead, sites, onbRate, leadRate, time.Duration(secs)*time.Second)
		}
	})
}

// capSize is a count from the environment variable env (1 to most), def
// when it is unset.
func capSize(b *testing.B, env string, most, def int) int {
	b.Helper()
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n < 1 || n > most {
		b.Fatalf("%s=%q: want a count from 1 to %d", env, v, most)
	}
	return n
}

// capacityRig is a `siteops worker` process and an ingress on one
// PostgreSQL store, the simulator, and what measures them.
type capacityRig struct {
	b          *testing.B
	c          client.Client
	sim        *simulator.Simulator
	api        *agentsite.Client
	st         *store.Store
	admin      *sql.DB
	schema     string
	database   string
	workerPID  int
	workerApp  string
	ingress    string // the ingress's URL
	ingApp     string
	ingressPID int
	queue      string
	// workerMetrics is the worker's metrics address.
	workerMetrics string
	s             *starter.Starter
	specs         []starter.Spec
	run           string
	sites         atomic.Int64
	events        atomic.Int64 // lead.created delivered, for unique event ids
	// adminTx counts the rig's own queries in the store's database, left
	// out of the commits.
	adminTx atomic.Int64
	// base is the rig's cost per second with nothing to do, left out
	// of the unit costs.
	base unitCost
	// accepted is when the ingress answered 2xx to the delivery of each
	// lead (by lead id), for the time from acceptance to the store.
	acceptedMu sync.Mutex
	accepted   map[string]time.Time
	// shards is the ingress's SITEOPS_LEAD_SHARDS
	// (SITEOPS_BENCH_CAP_LEAD_SHARDS; 0: a lead sync per site).
	shards int
}

func newCapacityRig(b *testing.B) *capacityRig {
	b.Helper()
	const apiKey = "svc_live_bench"
	r := &capacityRig{b: b, run: fmt.Sprintf("%d", time.Now().UnixNano()%1e9)}
	if os.Getenv("SITEOPS_BENCH_CAP_LEAD_SHARDS") != "" {
		r.shards = capSize(b, "SITEOPS_BENCH_CAP_LEAD_SHARDS", workflows.MaxLeadShards, 0)
	}
	bin, err := siteopstest.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	sim, simURL := testenv.Simulator(b, simulator.Config{Keys: map[string][]string{apiKey: {simulator.ScopeAll}}, Seed: 17})
	r.sim = sim
	if r.api, err = agentsite.NewClient(simURL, apiKey); err != nil {
		b.Fatal(err)
	}

	// One schema; the worker's and the ingress's connections each carry
	// an application_name of their own, so that their backends' CPU time
	// can be told apart.
	base := storetest.PostgresSchemaURL(b)
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	r.schema = u.Query().Get("search_path")
	r.database = strings.TrimPrefix(u.Path, "/")
	withApp := func(app string) string {
		v := *u
		q := v.Query()
		q.Set("application_name", app)
		v.RawQuery = q.Encode()
		return v.String()
	}
	r.workerApp, r.ingApp = "siteops-cap-worker-"+r.run, "siteops-cap-ingress-"+r.run
	// This process's store (the starter's knowledge texts; it migrates
	// the schema before the processes start).
	if r.st, err = store.Open(b.Context(), withApp("siteops-cap-starter-"+r.run), store.Options{SecretKey: storetest.TestKey}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.st.Close() })
	if r.admin, err = sql.Open("pgx", storetest.PostgresURL()); err != nil {
		b.Fatal(err)
	}
	r.admin.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = r.admin.Close() })

	r.queue = "siteops-cap-" + r.run
	mport, err := ports.Free()
	if err != nil {
		b.Fatal(err)
	}
	// The worker's /metrics, for the heartbeats it sends (not in any
	// history, yet each one an action).
	r.workerMetrics = fmt.Sprintf("127.0.0.1:%d", mport)
	cmd := exec.Command(bin, "worker", "--skip-checks")
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+temporalAddress, "TEMPORAL_NAMESPACE=default", "SITEOPS_TASK_QUEUE="+r.queue,
		"AGENTSITE_BASE_URL="+simURL, "AGENTSITE_API_KEY="+apiKey,
		"SITEOPS_DATABASE_URL="+withApp(r.workerApp), "SITEOPS_SECRET_KEY="+base64.StdEncoding.EncodeToString(storetest.TestKey),
		"SITEOPS_METRICS_ADDR="+r.workerMetrics, "SITEOPS_WORKER_VERSIONING=false", "SITEOPS_LOG_LEVEL=warn",
		// No scheduled sweep during a measurement: lead-sweep measures one.
		"SITEOPS_LEAD_SWEEP_EVERY="+testenv.NoReconcile.String())
	if v := os.Getenv("SITEOPS_BENCH_CAP_CACHE"); v != "" {
		// The worker's sticky cache: small, every task of a workflow
		// evicted meanwhile replays its history, as most lead syncs'
		// tasks do on a worker of 100,000 sites.
		cmd.Env = append(cmd.Env, "SITEOPS_WORKFLOW_CACHE_SIZE="+v)
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if b.Failed() {
			b.Logf("worker log:\n%s", logs.String())
		}
	})
	r.workerPID = cmd.Process.Pid

	r.c = dial(b)
	// The ingress, a process of its own too, on a loopback port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ing := exec.Command(bin, "ingress", "--skip-checks")
	ing.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+temporalAddress, "TEMPORAL_NAMESPACE=default", "SITEOPS_TASK_QUEUE="+r.queue,
		"SITEOPS_INGRESS_ADDR="+addr, "SITEOPS_INGRESS_ADMIN_ADDR=", "SITEOPS_WEBHOOK_SECRETS="+secret,
		"SITEOPS_DATABASE_URL="+withApp(r.ingApp), "SITEOPS_SECRET_KEY="+base64.StdEncoding.EncodeToString(storetest.TestKey),
		"SITEOPS_LOG_LEVEL=warn", fmt.Sprintf("SITEOPS_LEAD_SHARDS=%d", r.shards))
	var ingLogs bytes.Buffer
	ing.Stdout, ing.Stderr = &ingLogs, &ingLogs
	ing.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ing.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = ing.Process.Signal(syscall.SIGTERM)
		_ = ing.Wait()
		if b.Failed() {
			b.Logf("ingress log:\n%s", ingLogs.String())
		}
	})
	r.ingressPID = ing.Process.Pid
	r.ingress = "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := http.Get(r.ingress + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the ingress did not answer on %s in a minute: %v\n%s", addr, err, ingLogs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	r.s = starter.New(starter.Options{Client: r.c, Texts: r.st, TaskQueue: r.queue})
	r.specs = make([]starter.Spec, len(examples.Specs))
	for i, name := range examples.Specs {
		if r.specs[i], err = starter.LoadSpecFS(examples.FS, name); err != nil {
			b.Fatal(err)
		}
		r.specs[i].WaitForKnowledge = false // no knowledge.ready is sent here
	}
	// Warm up: one onboarding of each spec, and a lead sync, before any
	// clock starts (the worker's pollers and caches, the connections).
	for i := range r.specs {
		if err := r.onboard(b.Context(), fmt.Sprintf("warm-%d", i), i); err != nil {
			b.Fatalf("%v; worker log:\n%s", err, logs.String())
		}
	}
	warm := r.newSites(b, 4)
	r.startLeadSyncs(b, warm, 0)
	r.sendLeadEvents(b, warm, 8, 50)
	r.waitLeads(b, warm)
	r.terminate(warm)
	return r
}

// onboard runs one onboarding of spec i under a slug of its own to a
// published site.
func (r *capacityRig) onboard(ctx context.Context, slug string, i int) error {
	sp := r.specs[i%len(r.specs)]
	sp.Site.Slug = fmt.Sprintf("cap-%s-%s", r.run, slug)
	// Texts of its own, as every site has: the store keeps a text once
	// by its hash, and the same example texts again would only touch
	// their rows.
	sp.Knowledge = append([]starter.SpecKnowledge(nil), sp.Knowledge...)
	for k := range sp.Knowledge {
		if sp.Knowledge[k].Text != "" {
			sp.Knowledge[k].Text += "\n\n(" + sp.Site.Slug + ")"
		}
	}
	p, problems := starter.Prepare(sp)
	if len(problems) > 0 {
		return fmt.Errorf("%v", problems)
	}
	return onboardPublished(ctx, r.s, p, func() {})
}

func (r *capacityRig) onboardingID(slug string) string {
	return workflows.OnboardingID(fmt.Sprintf("cap-%s-%s", r.run, slug))
}

// capSite is a site of the simulator whose leads the benchmark counts.
type capSite struct {
	id    string
	leads atomic.Int64 // leads the simulator has for it
}

// newSites creates n sites in the simulator.
func (r *capacityRig) newSites(b *testing.B, n int) []*capSite {
	b.Helper()
	sites := make([]*capSite, n)
	parallel(b, n, 16, func(i int) error {
		slug := fmt.Sprintf("cap%s-%d", r.run, r.sites.Add(1))
		cs, err := r.api.CreateSite(b.Context(), "cap-"+slug, agentsite.NewSite{Title: slug, Slug: slug, Type: "business", Template: "minimal"})
		if err == nil {
			sites[i] = &capSite{id: cs.Site.ID}
		}
		return err
	})
	return sites
}

// startLeadSyncs starts the sites' lead syncs (poll: their poll interval,
// zero for the default) and waits until each has synced once and idles.
func (r *capacityRig) startLeadSyncs(b *testing.B, sites []*capSite, poll time.Duration) {
	b.Helper()
	if poll == 0 {
		r.prefill(b, sites)
	}
	before := r.sim.RequestStats().Requests
	parallel(b, len(sites), 16, func(i int) error {
		id := workflows.LeadSyncID(sites[i].id)
		_, err := r.c.SignalWithStartWorkflow(b.Context(), id, workflows.SignalSync, workflows.SyncRequest{},
			client.StartWorkflowOptions{ID: id, TaskQueue: r.queue, WorkflowIDReusePolicy: workflows.LeadSyncKind.Policy.Reuse},
			workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: sites[i].id, PollInterval: workflows.Duration(poll)})
		return err
	})
	deadline := time.Now().Add(5 * time.Minute)
	for r.sim.RequestStats().Requests < before+len(sites) {
		if time.Now().After(deadline) {
			b.Fatalf("the lead syncs did not all sync in 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // their workflow tasks after the sync
}

// prefill gives each site capPrefill leads before its first sync.
func (r *capacityRig) prefill(b *testing.B, sites []*capSite) {
	b.Helper()
	prefill := capPrefill(b)
	if prefill == 0 {
		return
	}
	for _, s := range sites {
		if _, err := r.sim.CreateLeads(s.id, prefill); err != nil {
			b.Fatal(err)
		}
		s.leads.Add(int64(prefill))
	}
}

// terminate ends the sites' lead syncs, so that their poll timers do not
// fire during a later measurement.
func (r *capacityRig) terminate(sites []*capSite) {
	for _, s := range sites {
		_ = r.c.TerminateWorkflow(context.Background(), workflows.LeadSyncID(s.id), "", "benchmark done")
	}
}

// sendLeadEvents adds n leads to the simulator, round robin over sites,
// and delivers a signed lead.created for each to the ingress at rate per
// second (open loop). It returns the number delivered.
func (r *capacityRig) sendLeadEvents(b *testing.B, sites []*capSite, n, rate int) int {
	b.Helper()
	return r.sendLeadEventsFor(b, sites, n, rate, 0)
}

// sendLeadEventsFor is sendLeadEvents, stopping at n or after d (when
// d > 0), whichever comes first.
func (r *capacityRig) sendLeadEventsFor(b *testing.B, sites []*capSite, n, rate int, d time.Duration) int {
	b.Helper()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	sent := 0
	for i := range n {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d > 0 && due.Sub(start) >= d {
			break
		}
		time.Sleep(time.Until(due))
		site := sites[i%len(sites)]
		ids, err := r.sim.CreateLeads(site.id, 1)
		if err != nil {
			b.Fatal(err)
		}
		site.leads.Add(1)
		sent++
		seq := r.events.Add(1)
		wg.Go(func() {
			id := fmt.Sprintf("evt_cap%s_%s_%d", r.run, site.id, seq)
			body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-25T09:00:00.000Z","data":{"site_id":%q,"lead_id":%q}}`, id, site.id, ids[0])
			resp, err := hc.Do(signedDelivery(r.ingress, secret, id, webhook.LeadCreated, body))
			if err != nil {
				failed.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
				return
			}
			r.acceptedMu.Lock()
			if r.accepted != nil {
				r.accepted[ids[0]] = time.Now()
			}
			r.acceptedMu.Unlock()
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d deliveries were not accepted", f, sent)
	}
	return sent
}

// reportStoredAfterAccepted reports the time from each lead's delivery
// being accepted (the ingress's 2xx, seen here) to the lead being in the
// store (its first_seen, the worker's clock on the same machine), p50 and
// p99 over the deliveries of the last sendLeadEvents.
func (r *capacityRig) reportStoredAfterAccepted(b *testing.B) {
	b.Helper()
	r.acceptedMu.Lock()
	accepted := r.accepted
	r.accepted = nil
	r.acceptedMu.Unlock()
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	var lat []time.Duration
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		marks := make([]string, len(chunk))
		for i, id := range chunk {
			args[i], marks[i] = id, fmt.Sprintf("$%d", i+1)
		}
		rows, err := r.st.DB().QueryContext(b.Context(), `SELECT lead_id, first_seen FROM leads WHERE lead_id IN (`+strings.Join(marks, ", ")+`)`, args...) //nolint:gosec // placeholders only
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var id string
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, at.Sub(accepted[id]))
		}
		if err := rows.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if len(lat) != len(ids) {
		b.Fatalf("%d of %d accepted leads found in the store", len(lat), len(ids))
	}
	slices.Sort(lat)
	at := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(ms(at(0.50)), "stored-after-accept-p50-ms")
	b.ReportMetric(ms(at(0.99)), "stored-after-accept-p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "stored-after-accept-max-ms")
}

// waitLeads waits until the store holds every lead the simulator has for
// the sites (each lead.created delivered has then been relayed and synced),
// for at most 5 minutes.
func (r *capacityRig) waitLeads(b *testing.B, sites []*capSite) {
	b.Helper()
	want := int64(0)
	ids := make([]string, len(sites))
	for i, s := range sites {
		want += s.leads.Load()
		ids[i] = s.id
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var got int64
		q := `SELECT count(*) FROM ` + r.schema + `.leads WHERE site_id = ANY($1)`
		r.adminTx.Add(1)
		if err := r.admin.QueryRowContext(b.Context(), q, ids).Scan(&got); err != nil {
			b.Fatal(err)
		}
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the store holds %d of the %d leads after 5 minutes", got, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// capReading is what the rig's parts had used at one moment.
type capReading struct {
	worker, ingress     time.Duration
	self, server        time.Duration
	pgWorker, pgIngress time.Duration
	rows, commits, wal  int64
	size                int64            // the store's tables with their indexes and TOAST, in bytes
	tables              map[string]int64 // rows written per table
	adminTx             int64            // the rig's own transactions in the store's database so far
	heartbeats          float64          // activity heartbeats the worker sent so far
	at                  time.Time
}

func (r *capacityRig) read(b *testing.B) capReading {
	b.Helper()
	// A backend reports its table and transaction counts at the end of a
	// transaction at most once a second, and one that then goes idle
	// 10 s later (PostgreSQL 15, PGSTAT_IDLE_INTERVAL): wait for them.
	time.Sleep(11 * time.Second)
	x := capReading{adminTx: r.adminTx.Add(2) - 2, at: time.Now(), worker: pidCPU(r.workerPID), ingress: pidCPU(r.ingressPID), self: selfCPU(), server: procsCPU(b, serverPIDs),
		heartbeats: heartbeatsSent(b, r.workerMetrics)}
	rows, err := r.admin.QueryContext(b.Context(), `SELECT pid, application_name FROM pg_stat_activity WHERE application_name IN ($1, $2)`, r.workerApp, r.ingApp)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var pid int
		var app string
		if err := rows.Scan(&pid, &app); err != nil {
			b.Fatal(err)
		}
		cpu := pidCPU(pid)
		if app == r.workerApp {
			x.pgWorker += cpu
		} else {
			x.pgIngress += cpu
		}
	}
	_ = rows.Close()
	q := `SELECT
		(SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = $1),
		(SELECT xact_commit FROM pg_stat_database WHERE datname = $2),
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
		(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind = 'r')`
	if err := r.admin.QueryRowContext(b.Context(), q, r.schema, r.database).Scan(&x.rows, &x.commits, &x.wal, &x.size); err != nil {
		b.Fatal(err)
	}
	x.tables = map[string]int64{}
	r.adminTx.Add(1)
	trows, err := r.admin.QueryContext(b.Context(), `SELECT relname, (n_tup_ins + n_tup_upd + n_tup_del)::bigint FROM pg_stat_user_tables WHERE schemaname = $1`, r.schema)
	if err != nil {
		b.Fatal(err)
	}
	for trows.Next() {
		var name string
		var n int64
		if err := trows.Scan(&name, &n); err != nil {
			b.Fatal(err)
		}
		x.tables[name] = n
	}
	_ = trows.Close()
	return x
}

// unitCost is what one unit (an onboarding, a lead event, a wake-up)
// cost, from readings before and after units of it and their histories.
type unitCost struct {
	units                                   int
	worker, ingress, self, server, pgW, pgI float64 // ms per unit
	rows, commits, wal, size                float64
	actions, events, historyB, heartbeats   float64
	elapsed                                 time.Duration
}

func costOf(before, after capReading, units int, h historyCount) unitCost {
	return costLess(before, after, units, h, unitCost{})
}

// costLess is costOf less base, the rig's cost per second with nothing to
// do (pollers, the relay's idle claims), for the time between the
// readings: what a unit costs beyond the processes' standing cost.
func costLess(before, after capReading, units int, h historyCount, base unitCost) unitCost {
	secs := after.at.Sub(before.at).Seconds()
	n := float64(units)
	per := func(d time.Duration, base float64) float64 { return (float64(d.Microseconds())/1000 - base*secs) / n }
	return unitCost{
		units:   units,
		worker:  per(after.worker-before.worker, base.worker),
		ingress: per(after.ingress-before.ingress, base.ingress),
		self:    per(after.self-before.self, base.self),
		server:  per(after.server-before.server, base.server),
		pgW:     per(after.pgWorker-before.pgWorker, base.pgW),
		pgI:     per(after.pgIngress-before.pgIngress, base.pgI),
		rows:    (float64(after.rows-before.rows) - base.rows*secs) / n,
		commits: (float64(after.commits-before.commits-(after.adminTx-before.adminTx)) - base.commits*secs) / n,
		wal:     (float64(after.wal-before.wal) - base.wal*secs) / n,
		size:    float64(after.size-before.size) / n,
		// Heartbeats are not in the histories: the worker's count of them.
		actions: (h.actions + after.heartbeats - before.heartbeats) / n, heartbeats: (after.heartbeats - before.heartbeats) / n,
		events: float64(h.events) / n, historyB: float64(h.bytes) / n,
		elapsed: after.at.Sub(before.at),
	}
}

// measureBaseline reads the rig's cost per second while nothing runs on
// it: the pollers of the worker, the relay's idle claims and gauges, the
// Temporal server's own timers.
func (r *capacityRig) measureBaseline(b *testing.B, d time.Duration) unitCost {
	b.Helper()
	before := r.read(b)
	time.Sleep(d)
	after := r.read(b)
	u := costOf(before, after, 1, historyCount{})
	secs := after.at.Sub(before.at).Seconds()
	for _, f := range []*float64{&u.worker, &u.ingress, &u.self, &u.server, &u.pgW, &u.pgI, &u.rows, &u.commits, &u.wal} {
		*f /= secs
	}
	u.size = 0
	return u
}

func (u unitCost) report(b *testing.B, unit string) {
	b.ReportMetric(float64(u.units), unit+"s")
	b.ReportMetric(u.worker, "worker-cpu-ms/"+unit)
	b.ReportMetric(u.ingress, "ingress-cpu-ms/"+unit)
	b.ReportMetric(u.pgW, "worker-pg-cpu-ms/"+unit)
	b.ReportMetric(u.pgI, "ingress-pg-cpu-ms/"+unit)
	b.ReportMetric(u.self, "self-cpu-ms/"+unit)
	b.ReportMetric(u.server, "server-cpu-ms/"+unit)
	b.ReportMetric(u.rows, "store-rows/"+unit)
	b.ReportMetric(u.commits, "commits/"+unit)
	b.ReportMetric(u.wal, "wal-B/"+unit)
	b.ReportMetric(u.size, "store-growth-B/"+unit)
	b.ReportMetric(u.actions, "actions/"+unit)
	b.ReportMetric(u.heartbeats, "heartbeat-actions/"+unit)
	b.ReportMetric(u.events, "history-events/"+unit)
	b.ReportMetric(u.historyB, "history-B/"+unit)
}

// measureOnboardings runs n onboardings, eight at a time.
func (r *capacityRig) measureOnboardings(b *testing.B, n int) unitCost {
	b.Helper()
	before := r.read(b)
	b.ResetTimer()
	parallel(b, n, 8, func(i int) error { return r.onboard(b.Context(), fmt.Sprintf("u%03d", i), i) })
	b.StopTimer()
	after := r.read(b)
	var h historyCount
	for i := range n {
		h.add(historyActions(b, r.c, r.onboardingID(fmt.Sprintf("u%03d", i)), 0))
	}
	return costLess(before, after, n, h, r.base)
}

// measureLeadEvents delivers n lead.created events at rate per second,
// round robin over sites fresh lead syncs, and waits until every lead is
// in the store.
func (r *capacityRig) measureLeadEvents(b *testing.B, nSites, n, rate int) unitCost {
	b.Helper()
	sites := r.newSites(b, nSites)
	if r.shards > 0 {
		return r.measureShardedLeadEvents(b, sites, n, rate)
	}
	r.startLeadSyncs(b, sites, 0)
	defer r.terminate(sites)
	marks := r.historyMarks(b, sites)
	before, after, sent := r.deliverMeasured(b, sites, n, rate)
	return costLess(before, after, sent, r.historiesSince(b, sites, marks), r.base)
}

// deliverMeasured delivers n lead.created events at rate per second over
// sites between two readings, waits until every lead is in the store,
// and reports the time from each 2xx to its lead in the store.
func (r *capacityRig) deliverMeasured(b *testing.B, sites []*capSite, n, rate int) (before, after capReading, sent int) {
	b.Helper()
	before = r.read(b)
	b.ResetTimer()
	r.acceptedMu.Lock()
	r.accepted = map[string]time.Time{}
	r.acceptedMu.Unlock()
	sent = r.sendLeadEvents(b, sites, n, rate)
	r.waitLeads(b, sites)
	b.StopTimer()
	after = r.read(b)
	r.reportStoredAfterAccepted(b) // after the reading: its queries are not the units'
	logTables(b, before, after, sent)
	return before, after, sent
}

// measureShardedLeadEvents is measureLeadEvents with lead shards: the
// sites have no lead sync of their own; one event each first brings
// their prefilled leads in (and starts the shards), then n events are
// measured, their actions counted in the shards' histories.
func (r *capacityRig) measureShardedLeadEvents(b *testing.B, sites []*capSite, n, rate int) unitCost {
	b.Helper()
	r.prefill(b, sites)
	r.sendLeadEvents(b, sites, len(sites), rate)
	r.waitLeads(b, sites)
	time.Sleep(2 * time.Second) // the shards' workflow tasks after their syncs
	marks := r.shardMarks(b)
	before, after, sent := r.deliverMeasured(b, sites, n, rate)
	b.ReportMetric(float64(r.shards), "shards")
	return costLess(before, after, sent, r.shardsSince(b, marks), r.base)
}

// shardMarks is where each running lead event shard's history stood.
func (r *capacityRig) shardMarks(b *testing.B) map[string]historyCount {
	b.Helper()
	marks := map[string]historyCount{}
	for k := range r.shards {
		id := workflows.LeadEventsKind.ID(fmt.Sprint(k))
		d, err := r.c.DescribeWorkflow(b.Context(), id, "")
		if err != nil {
			continue // no site of the run fell in it
		}
		marks[id] = historyCount{lastEvent: d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength(), runID: d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()}
	}
	if len(marks) == 0 {
		b.Fatal("no lead event shard runs")
	}
	return marks
}

// shardsSince counts the shards' histories since marks, across the runs
// they continued as new into meanwhile.
func (r *capacityRig) shardsSince(b *testing.B, marks map[string]historyCount) historyCount {
	b.Helper()
	var h historyCount
	for id, m := range marks {
		run, since := m.runID, m.lastEvent
		for run != "" {
			g, next := historyOfRun(b, r.c, id, run, since)
			h.add(g)
			run, since = next, 0
		}
	}
	return h
}

// measureIdle starts n lead syncs of empty sites polling every poll and
// measures them for window: every task they get is a wake-up of their
// poll timer.
func (r *capacityRig) measureIdle(b *testing.B, n int, poll, window time.Duration) unitCost {
	b.Helper()
	sites := r.newSites(b, n)
	r.startLeadSyncs(b, sites, poll)
	defer r.terminate(sites)
	marks := r.historyMarks(b, sites)
	before := r.read(b)
	b.ResetTimer()
	time.Sleep(window)
	// Ended, so that no wake-up falls between the readings and the
	// histories.
	r.terminate(sites)
	b.StopTimer()
	after := r.read(b)
	h := r.historiesSince(b, sites, marks)
	if h.timersFired == 0 {
		b.Fatal("no poll timer fired")
	}
	u := costLess(before, after, h.timersFired, h, r.base)
	b.ReportMetric(float64(24*time.Hour/workflows.DefaultPollInterval), "wake-ups/day/site")
	return u
}

// measureSweep starts n lead syncs without a poll interval, lets them
// catch up and idle, and runs one lead sweep as its schedule would: the
// units are the sites it handled (every site with a lead sync position in
// the store, those of earlier measurements included).
func (r *capacityRig) measureSweep(b *testing.B, n int) unitCost {
	b.Helper()
	sites := r.newSites(b, n)
	r.startLeadSyncs(b, sites, 0)
	defer r.terminate(sites)
	marks := r.historyMarks(b, sites)
	before := r.read(b)
	b.ResetTimer()
	id := workflows.LeadSweepKind.ID(fmt.Sprintf("bench-%s-%d", r.run, r.sites.Add(1)))
	run, err := r.c.ExecuteWorkflow(b.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: r.queue, Priority: workflows.LeadSweepKind.Priority("")},
		workflows.LeadSweepWorkflowName, workflows.LeadSweepInput{})
	if err != nil {
		b.Fatal(err)
	}
	var st workflows.LeadSweepStatus
	if err := run.Get(b.Context(), &st); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	after := r.read(b)
	idle := r.historiesSince(b, sites, marks)
	if idle.events != 0 {
		b.Errorf("the idle lead syncs wrote %d history events during the sweep; want none (no timer, nothing missed)", idle.events)
	}
	if st.Checked < n || st.Missed != 0 || st.Failed != 0 {
		b.Errorf("sweep = %+v; want at least the %d idle sites current and none missed or failed", st, n)
	}
	h := historyActions(b, r.c, id, 0)
	h.add(idle)
	handled := st.Checked + st.Missed + st.Syncing + st.Failed
	b.Logf("sweep of %d sites (%d started here): %+v in %s", handled, n, st, after.at.Sub(before.at).Round(time.Millisecond))
	u := costLess(before, after, handled, h, r.base)
	b.ReportMetric(u.actions*float64(24*time.Hour/worker.DefaultLeadSweepEvery), "actions/day/idle-site")
	return u
}

// measureMixed runs onboardings at onbRate per second and lead.created
// deliveries at leadRate per second for d, then compares the worker's CPU
// time and the store's rows with what the unit costs predict.
func (r *capacityRig) measureMixed(b *testing.B, onb, lead unitCost, nSites, onbRate, leadRate int, d time.Duration) {
	b.Helper()
	sites := r.newSites(b, nSites)
	r.startLeadSyncs(b, sites, 0)
	defer r.terminate(sites)
	marks := r.historyMarks(b, sites)
	var shardMarks map[string]historyCount
	if r.shards > 0 {
		shardMarks = r.shardMarks(b)
	}
	before := r.read(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	var onboarded atomic.Int64
	wg.Go(func() {
		start := time.Now()
		var inner sync.WaitGroup
		for i := 0; ; i++ {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(onbRate))
			if due.Sub(start) >= d {
				break
			}
			time.Sleep(time.Until(due))
			inner.Go(func() {
				if err := r.onboard(b.Context(), fmt.Sprintf("m%04d", i), i); err != nil {
					b.Error(err)
					return
				}
				onboarded.Add(1)
			})
		}
		inner.Wait()
	})
	sent := r.sendLeadEventsFor(b, sites, 1<<30, leadRate, d)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	r.waitLeads(b, sites)
	b.StopTimer()
	after := r.read(b)
	logTables(b, before, after, sent)
	nOnb := float64(onboarded.Load())
	nEv := float64(sent)
	secs := after.at.Sub(before.at).Seconds()
	workerCPU := float64((after.worker - before.worker).Microseconds()) / 1000
	rows := float64(after.rows - before.rows)
	base := r.base
	predCPU := nOnb*onb.worker + nEv*lead.worker + base.worker*secs
	predRows := nOnb*onb.rows + nEv*lead.rows + base.rows*secs
	b.ReportMetric(nOnb, "onboardings")
	b.ReportMetric(nEv, "events")
	b.ReportMetric(secs, "window-s")
	b.ReportMetric(workerCPU, "worker-cpu-ms")
	b.ReportMetric(predCPU, "predicted-worker-cpu-ms")
	b.ReportMetric(workerCPU/predCPU, "worker-cpu-of-predicted")
	ingCPU := float64((after.ingress - before.ingress).Microseconds()) / 1000
	b.ReportMetric(ingCPU, "ingress-cpu-ms")
	b.ReportMetric(ingCPU/(nOnb*onb.ingress+nEv*lead.ingress+base.ingress*secs), "ingress-cpu-of-predicted")
	commits := float64(after.commits - before.commits - (after.adminTx - before.adminTx))
	b.ReportMetric(commits/(nOnb*onb.commits+nEv*lead.commits+base.commits*secs), "commits-of-predicted")
	b.ReportMetric(rows, "store-rows")
	b.ReportMetric(predRows, "predicted-store-rows")
	b.ReportMetric(rows/predRows, "store-rows-of-predicted")
	wal := float64(after.wal - before.wal)
	predWAL := nOnb*onb.wal + nEv*lead.wal + base.wal*secs
	b.ReportMetric(wal/predWAL, "wal-of-predicted")
	pgW := float64((after.pgWorker - before.pgWorker).Microseconds()) / 1000
	b.ReportMetric(pgW/(nOnb*onb.pgW+nEv*lead.pgW+base.pgW*secs), "worker-pg-cpu-of-predicted")
	// Temporal actions, the model's cost on Temporal Cloud: the
	// onboardings' histories whole, the lead syncs' since the marks, and
	// the heartbeats the worker sent meanwhile.
	h := r.historiesSince(b, sites, marks)
	if r.shards > 0 {
		// The events went to the shards: their histories, across runs.
		h.add(r.shardsSince(b, shardMarks))
	}
	for i := range int(nOnb) {
		h.add(historyActions(b, r.c, r.onboardingID(fmt.Sprintf("m%04d", i)), 0))
	}
	actions := h.actions + after.heartbeats - before.heartbeats
	predActions := nOnb*onb.actions + nEv*lead.actions
	b.ReportMetric(actions, "actions")
	b.ReportMetric(predActions, "predicted-actions")
	b.ReportMetric(actions/predActions, "actions-of-predicted")
}

// historyCount is what a stretch of workflow histories holds.
type historyCount struct {
	actions, heartbeats float64
	events, bytes       int
	timersFired         int
	lastEvent           int64
	runID               string
	continuedAsNew      int
}

func (h *historyCount) add(g historyCount) {
	h.actions += g.actions
	h.heartbeats += g.heartbeats
	h.events += g.events
	h.bytes += g.bytes
	h.timersFired += g.timersFired
	h.continuedAsNew += g.continuedAsNew
}

// historyActions reads the latest run of workflow id from the event after
// since and counts in it the actions Temporal Cloud bills, by the rule of
// https://docs.temporal.io/cloud/actions as far as a history shows them:
//
//   - a workflow started (by a client, by SignalWithStart, by
//     continue-as-new: here the ContinuedAsNew event stands for the next
//     run's start, and a run's own start counts only if it was not
//     continued): 1;
//   - a signal received (WorkflowExecutionSignaled): 1;
//   - an activity attempt (ActivityTaskStarted counts its attempt number:
//     retries are not in the history): 1 each;
//   - a timer started: 1;
//   - a search attribute upsert, a side effect, an update accepted, a
//     child workflow or Nexus operation started, a signal sent: 1;
//     local activities: 1 per workflow task that ran any; version
//     markers: 0;
//   - activity heartbeats are not in the history: costLess adds the
//     RecordActivityTaskHeartbeat calls the worker counted meanwhile
//     (heartbeatsSent), whichever activity sent them.
//
// Queries are actions too; none is made here.
func historyActions(b *testing.B, c client.Client, id string, since int64) historyCount {
	b.Helper()
	h, _ := historyOfRun(b, c, id, "", since)
	return h
}

// historyOfRun is historyActions of one run (the latest when runID is
// empty); next is the run it continued as new into, if it did.
func historyOfRun(b *testing.B, c client.Client, id, runID string, since int64) (h historyCount, next string) {
	b.Helper()
	it := c.GetWorkflowHistory(b.Context(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]string{} // activity type by scheduled event id
	laTasks := map[int64]bool{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		h.lastEvent = ev.GetEventId()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if ev.GetEventId() <= since {
			continue
		}
		h.events++
		h.bytes += proto.Size(ev)
		h.actions += eventActions(ev, laTasks)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			h.timersFired++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			h.continuedAsNew++
			next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return h, next
}

// heartbeatsSent is how many activity heartbeats the worker whose metrics
// are at addr has sent to Temporal: the SDK counts each of its calls in
// temporal_request{operation="RecordActivityTaskHeartbeat"}.
func heartbeatsSent(b *testing.B, addr string) float64 {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback, the worker's own
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "temporal_request_total{") || !strings.Contains(line, `operation="RecordActivityTaskHeartbeat"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			n += v
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}

func eventActions(ev *historypb.HistoryEvent, laTasks map[int64]bool) float64 {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		if ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != "" {
			return 0 // counted as the previous run's ContinuedAsNew
		}
		return 1
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		enumspb.EVENT_TYPE_TIMER_STARTED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
		enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
		enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
		enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED:
		return 1
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		return float64(max(ev.GetActivityTaskStartedEventAttributes().GetAttempt(), 1))
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		for k := range ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields() {
			if k != "TemporalChangeVersion" {
				return 1
			}
		}
		return 0
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		a := ev.GetMarkerRecordedEventAttributes()
		switch a.GetMarkerName() {
		case "SideEffect", "MutableSideEffect":
			return 1
		case "LocalActivity":
			if laTasks[a.GetWorkflowTaskCompletedEventId()] {
				return 0
			}
			laTasks[a.GetWorkflowTaskCompletedEventId()] = true
			return 1
		}
	}
	return 0
}

// historyMarks is where each site's lead sync's history stood.
func (r *capacityRig) historyMarks(b *testing.B, sites []*capSite) map[string]historyCount {
	b.Helper()
	marks := map[string]historyCount{}
	for _, s := range sites {
		d, err := r.c.DescribeWorkflow(b.Context(), workflows.LeadSyncID(s.id), "")
		if err != nil {
			b.Fatal(err)
		}
		marks[s.id] = historyCount{lastEvent: d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength(), runID: d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()}
	}
	return marks
}

// historiesSince counts the sites' lead syncs' histories since marks
// (their latest runs; a run continued as new since is a failure here,
// the stretches being far shorter than a run).
func (r *capacityRig) historiesSince(b *testing.B, sites []*capSite, marks map[string]historyCount) historyCount {
	b.Helper()
	var h historyCount
	for _, s := range sites {
		m := marks[s.id]
		d, err := r.c.DescribeWorkflow(b.Context(), workflows.LeadSyncID(s.id), "")
		if err != nil {
			b.Fatal(err)
		}
		if d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId() != m.runID {
			b.Fatalf("the lead sync of %s continued as new during the measurement", s.id)
		}
		h.add(historyActions(b, r.c, workflows.LeadSyncID(s.id), m.lastEvent))
	}
	return h
}

// logTables logs the rows written to each of the store's tables per unit.
func logTables(b *testing.B, before, after capReading, units int) {
	var parts []string
	for name, n := range after.tables {
		if d := n - before.tables[name]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(d)/float64(units)))
		}
	}
	slices.Sort(parts)
	b.Logf("rows written per unit (%d): %s", units, strings.Join(parts, ", "))
}

// capPrefill is capLeadPrefill or SITEOPS_BENCH_CAP_PREFILL.
func capPrefill(b *testing.B) int {
	b.Helper()
	v := os.Getenv("SITEOPS_BENCH_CAP_PREFILL")
	if v == "" {
		return capLeadPrefill
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n < 0 || n >= workflows.DefaultPageLimit {
		b.Fatalf("SITEOPS_BENCH_CAP_PREFILL=%q: want 0 to %d", v, workflows.DefaultPageLimit-1)
	}
	return n
}
