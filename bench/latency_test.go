package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// signalClock is the relay's Temporal client with a stopwatch: it notes
// when each event's signal was accepted by Temporal (lead.created by
// SignalWithStart, knowledge.ready by Signal). Both calls return once the
// server has written the signal to the workflow's history, so that moment
// is when the event is in the history.
type signalClock struct {
	client.Client
	mu          sync.Mutex
	at          map[string]time.Time
	leadSignals atomic.Int64
}

func (s *signalClock) SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
	options client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	run, err := s.Client.SignalWithStartWorkflow(ctx, workflowID, signalName, signalArg, options, wf, args...)
	if err == nil {
		if sig, ok := signalArg.(workflows.LeadsCreatedSignal); ok {
			s.leadSignals.Add(1)
			s.note(time.Now(), sig.EventIDs...)
		}
	}
	return run, err
}

// SignalWorkflow notes a knowledge.ready's signal, and a lead.created's:
// the relay signals a lead sync that runs and starts one only when none
// does (SignalWithStartWorkflow above).
func (s *signalClock) SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error {
	err := s.Client.SignalWorkflow(ctx, workflowID, runID, signalName, arg)
	if err != nil {
		return err
	}
	switch sig := arg.(type) {
	case workflows.KnowledgeReadySignal:
		s.note(time.Now(), sig.EventID)
	case workflows.LeadsCreatedSignal:
		s.leadSignals.Add(1)
		s.note(time.Now(), sig.EventIDs...)
	}
	return nil
}

func (s *signalClock) note(at time.Time, ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.at[id] = at
	}
}

func (s *signalClock) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// Shape of BenchmarkEndToEndLatency's traffic.
const (
	latencyLeadSites  = 200 // sites the lead.created events go to, at random
	latencyOnboarding = 10  // sites whose onboarding waits for knowledge.ready
	latencyPriority   = 10  // every 10th delivery is a knowledge.ready
)

// BenchmarkEndToEndLatency offers signed deliveries at a fixed rate (open
// loop) to a real ingress (HTTP server, inbox on PostgreSQL, relay) and
// reports, over b.N deliveries, the time from each delivery's 2xx to its
// signal being in its workflow's history, p50 and p99, for the two kinds
// the relay treats differently: lead.created (nine in ten deliveries, each
// for one of 200 sites drawn at random; the bulk lane, where the relay
// coalesces a site's events for up to LeadCoalesce, 1 s) and
// knowledge.ready (one in ten, for ten onboarding workflows that exist;
// the priority lane, never held). coalesce=off runs the same traffic with
// LeadCoalesce turned off, which shows what coalescing costs in latency and
// saves in signals (lead-signals: signal and SignalWithStart calls per
// lead.created).
func BenchmarkEndToEndLatency(b *testing.B) {
	for _, rate := range []int{100, 1000} {
		for _, coalesce := range []bool{true, false} {
			name := fmt.Sprintf("rate=%d/coalesce=on", rate)
			if !coalesce {
				name = fmt.Sprintf("rate=%d/coalesce=off", rate)
			}
			b.Run(name, func(b *testing.B) { endToEnd(b, rate, coalesce) })
		}
	}
}

func endToEnd(b *testing.B, rate int, coalesce bool) {
	st := storetest.Open(b, store.Postgres)
	clock := &signalClock{Client: dialAsSiteops(b), at: map[string]time.Time{}}
	so := ingress.ServerOptions{Store: st, Temporal: clock, TaskQueue: taskQueue,
		EnvSecrets: []string{secret}, Logger: slog.New(slog.DiscardHandler)}
	if !coalesce {
		so.Relay.LeadCoalesce = -1
	}
	srv, err := ingress.New(so)
	if err != nil {
		b.Fatal(err)
	}
	run := time.Now().UnixNano()
	// The onboardings that wait for knowledge.ready: running workflows (on
	// a task queue nobody polls, so they only collect signals) that the
	// store names as their sites' owners, as starter.Onboard records them.
	onboardingSites := make([]string, latencyOnboarding)
	for k := range onboardingSites {
		onboardingSites[k] = fmt.Sprintf("site_o%d_%02d", run, k)
		id := fmt.Sprintf("bench-latency-onboarding-%d-%02d", run, k)
		if _, err := clock.ExecuteWorkflow(b.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue + "-idle"}, "BenchIdleOnboarding"); err != nil {
			b.Fatal(err)
		}
		if err := st.SetSiteWorkflow(b.Context(), onboardingSites[k], id); err != nil {
			b.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }() //nolint:errcheck // the server's end, not its error, is awaited
	url := "http://" + ln.Addr().String()

	rnd := rand.New(rand.NewPCG(uint64(rate), 13)) // a reproducible traffic shape
	bodies := make([]string, b.N)
	ids := make([]string, b.N)
	types := make([]webhook.EventType, b.N)
	for i := range b.N {
		ids[i] = fmt.Sprintf("evt_l%d_%07d", run, i)
		if i%latencyPriority == latencyPriority-1 {
			types[i] = webhook.KnowledgeReady
			bodies[i] = fmt.Sprintf(`{"id":%q,"type":"knowledge.ready","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":%q,"knowledge_id":"kn_%d"}}`,
				ids[i], onboardingSites[i/latencyPriority%latencyOnboarding], i)
			continue
		}
		types[i] = webhook.LeadCreated
		bodies[i] = fmt.Sprintf(`{"id":%q,"type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_l%d_%03d","lead_id":"lead_%d"}}`,
			ids[i], run, rnd.IntN(latencyLeadSites), i)
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	answered := make([]time.Time, b.N)
	answer := make([]time.Duration, b.N)
	b.ResetTimer()
	cpu0 := readCPU(b)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range b.N {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		time.Sleep(time.Until(due))
		wg.Go(func() {
			resp, err := hc.Do(signedDelivery(url, secret, ids[i], types[i], bodies[i]))
			if err != nil {
				b.Error(err)
				return
			}
			answered[i] = time.Now()
			answer[i] = answered[i].Sub(due)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("delivery %d answered %d", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for clock.count() < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d events reached their workflow within 2 minutes", clock.count(), b.N)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	// How busy the machine's two cores were: CPU seconds per second of
	// the Temporal server, PostgreSQL and this process (load generator,
	// ingress, relay).
	cpu, elapsed := readCPU(b).sub(cpu0), time.Since(start)
	b.ReportMetric(cpu.server.Seconds()/elapsed.Seconds(), "server-cores")
	b.ReportMetric(cpu.postgres.Seconds()/elapsed.Seconds(), "pg-cores")
	b.ReportMetric(cpu.self.Seconds()/elapsed.Seconds(), "self-cores")
	var lead, priority []time.Duration
	clock.mu.Lock()
	for i, id := range ids {
		d := clock.at[id].Sub(answered[i])
		if types[i] == webhook.LeadCreated {
			lead = append(lead, d)
		} else {
			priority = append(priority, d)
		}
	}
	clock.mu.Unlock()
	reportPercentiles(b, "lead", lead)
	reportPercentiles(b, "priority", priority)
	reportPercentiles(b, "answer", answer)
	b.ReportMetric(float64(clock.leadSignals.Load())/float64(len(lead)), "lead-signals")
}

// reportPercentiles reports p50 and p99 of ds in milliseconds, as
// NAME-p50-ms and NAME-p99-ms.
func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, name+"-p99-ms")
}
