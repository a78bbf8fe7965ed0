package production

import (
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/workflows"
)

// phaseResult is what an onboarding phase measured.
type phaseResult struct {
	rate     float64
	took     time.Duration
	p50, max time.Duration
}

// onboardingPhase runs n onboardings at once and returns their rate, from
// the first start to the last completion, and their median latency.
func onboardingPhase(t *testing.T, s *starter.Starter, name string, n int) phaseResult {
	t.Helper()
	spec := loadSpec(t)
	lat := make([]time.Duration, n)
	var (
		mu   sync.Mutex
		last time.Time
	)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sp := spec
			sp.Site.Slug = fmt.Sprintf("phase-%s-%03d", name, i)
			p, problems := starter.Prepare(sp)
			if len(problems) > 0 {
				t.Error(problems)
				return
			}
			t0 := time.Now()
			o, err := s.Onboard(t.Context(), p)
			if err != nil {
				t.Error(err)
				return
			}
			if err := s.Wait(t.Context(), o.Run, nil); err != nil {
				t.Error(err)
			}
			done := time.Now()
			lat[i] = done.Sub(t0)
			mu.Lock()
			if done.After(last) {
				last = done
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	took := last.Sub(start)
	slices.Sort(lat)
	return phaseResult{rate: float64(n) / took.Seconds(), took: took.Round(time.Millisecond), p50: lat[n/2].Round(time.Millisecond), max: lat[n-1].Round(time.Millisecond)}
}

// relayReplicas says how to run ingress replica i and reach its webhook
// and admin ports. Its task queue must be one no worker polls: the lead
// syncs the relay phases start stay there, never run, and go with the
// cluster, instead of lying in the backlog of the queue the onboardings
// use (a worker's polls would drain it first, and the onboarding phase
// would measure that).
type relayReplicas struct {
	env        func(i int) []string
	url, admin func(i int) string
}

// relayResult is what a relay phase measured.
type relayResult struct {
	events     int
	rate       float64
	took       time.Duration
	perReplica []int // events each replica signalled, from its metrics
}

// relayPhase starts replicas ingress processes on an empty inbox, commits
// n lead.created events (for n sites, so that each is a SignalWithStart of
// its own) in one transaction, and returns the rate at which the relays
// dispatch them: from the moment they are pending to the last dispatch the
// inbox records. A signed delivery to each replica right after the commit
// wakes its relay, so that the relay's idle poll (up to a second) is not
// part of the time. It checks that the replicas' counters of signalled
// events add up to exactly the events (none dispatched twice) and, with
// several replicas, that each took a share.
func relayPhase(t *testing.T, st *store.Store, r relayReplicas, replicas, n int) relayResult {
	t.Helper()
	var procs []*proc
	for i := range replicas {
		p := startProc(t, fmt.Sprintf("relay-%d-of-%d", i+1, replicas), r.env(i), "ingress")
		procs = append(procs, p)
		readyOrLog(t, r.url(i)+"/healthz", p)
		readyOrLog(t, r.admin(i)+"/readyz", p)
	}
	run := time.Now().UnixNano()
	prefix := fmt.Sprintf("evt_relay_%d_", run)
	site := func(i int) string { return fmt.Sprintf("site_r%d_%06d", run, i) }
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("%s%06d", prefix, i)
		body := fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":%q,"lead_id":"lead_1"}}`, id, site(i))
		if _, err := tx.ExecContext(t.Context(), `INSERT INTO inbox (event_id, event_type, kind, lane, receiver, endpoint_id, received_at, body, next_attempt_at)
			VALUES ($1, 'lead.created', 'webhook', $2, '', 'env', now(), $3, now())`, id, int(store.LaneBulk), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	// The clock starts as the events become pending: with the commit.
	start := time.Now()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		if code := deliver(t, r.url(i), fmt.Sprintf("%swake_%d", prefix, i), site(n+i), "lead_1"); code != http.StatusOK {
			t.Fatalf("waking relay %d: the delivery got %d, want 200", i+1, code)
		}
	}
	total := n + replicas

	var last time.Time
	siteopstest.Eventually(t, 5*time.Minute, "the relays to dispatch every event", func() bool {
		var pending int
		var at sql.NullTime
		err := st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FILTER (WHERE dispatched_at IS NULL), MAX(dispatched_at) FROM inbox WHERE event_id LIKE $1`,
			prefix+"%").Scan(&pending, &at)
		last = at.Time
		return err == nil && pending == 0
	})
	took := last.Sub(start)

	// Each replica counts what it signalled once the batch is recorded,
	// just after the inbox shows it: read until they add up, then check
	// that they add up to exactly the events.
	per := make([]int, replicas)
	sum := 0
	within := time.Now().Add(30 * time.Second)
	for {
		sum = 0
		for i := range replicas {
			per[i] = int(metricSum(scrape(t, r.admin(i)), "siteops_relay_dispatched_total",
				`type="lead.created"`, `outcome="`+store.OutcomeSignalled+`"`))
			sum += per[i]
		}
		if sum >= total || time.Now().After(within) {
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval of the loop's deadline
	}
	if sum != total {
		t.Errorf("relay phase with %d replicas: the replicas signalled %d events (%v), want exactly %d", replicas, sum, per, total)
	}
	if replicas > 1 && slices.Contains(per, 0) {
		t.Errorf("relay phase with %d replicas: a replica dispatched nothing (%v); the replicas do not share the inbox", replicas, per)
	}
	for _, p := range procs {
		p.stop()
	}
	return relayResult{events: total, rate: float64(total) / took.Seconds(), took: took.Round(time.Millisecond), perReplica: per}
}

// signalCeiling is what the cluster allows the relays at most: n
// SignalWithStart calls of the relay's kind (each starting a lead sync of
// its own on queue, which no worker polls) from parallel goroutines with no
// store in between, timed from the first call to the last answer. It
// returns calls per second.
func signalCeiling(t *testing.T, cl client.Client, queue string, n, parallel int) float64 {
	t.Helper()
	run := time.Now().UnixNano()
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			site := fmt.Sprintf("site_c%d_%06d", run, i)
			id := workflows.LeadSyncID(site)
			_, err := cl.SignalWithStartWorkflow(t.Context(), id, workflows.SignalLeadsCreated,
				workflows.LeadsCreatedSignal{EventIDs: []string{fmt.Sprintf("evt_ceiling_%d_%06d", run, i)}},
				client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowIDReusePolicy: workflows.LeadSyncKind.Policy.Reuse},
				workflows.LeadSyncWorkflowName, workflows.LeadSyncInput{SiteID: site})
			if err != nil {
				t.Errorf("SignalWithStart %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
