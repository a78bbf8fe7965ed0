package bench

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// incidentSites is how many sites BenchmarkIncident turns off per variant;
// SITEOPS_BENCH_INCIDENTS lowers it for a quick check.
const incidentSites = 20

const noopWorkflowName = "BenchNoopWorkflow"

// noopWorkflow does nothing: the baseline's one workflow start.
func noopWorkflow(workflow.Context) error { return nil }

// BenchmarkIncident measures `siteops embed off` from the command to the
// acknowledged PATCH: the built binary is run against the dev server, with
// an in-process worker and the simulator, and timed from exec until it
// exits (it exits once the service has acknowledged the PATCH). For each
// site, one after the other and interleaved so that all three see the same
// noise: the binary; starter.EmbedOff in process (what the binary calls,
// without the process start and the dial); and the baseline, one direct
// PATCH with the agentsite client plus one start of a no-op workflow. It
// reports the p50 of each and their ratios to the baseline (goal: the
// command under 2×). Use -benchtime 1x.
func BenchmarkIncident(b *testing.B) {
	scenario(b)
	n := benchSize(b, "SITEOPS_BENCH_INCIDENTS", incidentSites)
	bin, err := siteopstest.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		cli, inProc, base, parts := incidentRun(b, bin, n)
		b.ReportMetric(ms(p50(cli)), "cli-p50-ms")
		b.ReportMetric(ms(p50(inProc)), "starter-p50-ms")
		b.ReportMetric(ms(p50(base)), "baseline-p50-ms")
		b.ReportMetric(ms(p50(cli))/ms(p50(base)), "ratio")
		b.ReportMetric(ms(p50(inProc))/ms(p50(base)), "starter-ratio")
		b.ReportMetric(ms(p50(parts.exec)), "exec-help-p50-ms")
		b.ReportMetric(ms(p50(parts.dial)), "dial-p50-ms")
		b.ReportMetric(ms(p50(parts.attrs)), "search-attrs-p50-ms")
	}
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

func p50(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2 // as medianOf
	}
	return s[len(s)/2]
}

// incidentParts are pieces of the command's time measured on their own:
// starting the binary (siteops --help), dialling Temporal, and listing the
// namespace's search attributes (EmbedOff does, to tag the incident).
type incidentParts struct{ exec, dial, attrs []time.Duration }

func incidentRun(b *testing.B, bin string, n int) (cli, inProc, base []time.Duration, parts incidentParts) {
	b.Helper()
	const apiKey = "svc_live_bench"
	run := time.Now().UnixNano()
	queue := fmt.Sprintf("bench-incident-%d", run)
	e := testenv.New(b, testenv.Options{Address: temporalAddress, TaskQueue: queue, APIKey: apiKey, Sim: simulator.Config{Seed: 13}})
	defer e.Close()
	api, err := wiring.APIClient(config.AgentSite{BaseURL: e.SimURL, APIKey: apiKey}, nil)
	if err != nil {
		b.Fatal(err)
	}
	c, s := e.Client, e.Starter
	// One SDK worker for the siteops workflows and the baseline's no-op,
	// which cannot share a task queue with a worker that lacks it.
	siteopsWorker(b, c, queue, api, e.Store, func(w sdkworker.Worker) {
		w.RegisterWorkflowWithOptions(noopWorkflow, workflow.RegisterOptions{Name: noopWorkflowName})
	})
	env := append(os.Environ(), "TEMPORAL_ADDRESS="+temporalAddress, "TEMPORAL_NAMESPACE=default",
		"SITEOPS_TASK_QUEUE="+queue, "SITEOPS_OPERATOR=bench")

	site := func(i int, variant string) string {
		slug := fmt.Sprintf("inc-%s-%d-%03d", variant, run, i)
		cs, err := api.CreateSite(b.Context(), slug, agentsite.NewSite{Title: "Incident", Slug: slug, Type: "business", Template: "minimal"})
		if err != nil {
			b.Fatal(err)
		}
		return cs.Site.ID
	}
	viaCLI := func(siteID string) time.Duration {
		cmd := exec.CommandContext(b.Context(), bin, "embed", "off", "--site", siteID, "--reason", "bench")
		cmd.Env = env
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		if err != nil || !strings.Contains(out.String(), "is off") {
			b.Fatalf("siteops embed off --site %s: %v\n%s", siteID, err, out.String())
		}
		return took
	}
	viaStarter := func(siteID string) time.Duration {
		start := time.Now()
		res, err := s.EmbedOff(b.Context(), siteID, "bench", "bench")
		took := time.Since(start)
		if err != nil || res.Status.State != workflows.IncidentOff {
			b.Fatalf("EmbedOff %s: %v (state %q)", siteID, err, res.Status.State)
		}
		return took
	}
	baseline := func(siteID string) time.Duration {
		start := time.Now()
		if _, err := api.SetEmbed(b.Context(), "bench-off-"+siteID, siteID, false); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ExecuteWorkflow(b.Context(), client.StartWorkflowOptions{ID: "bench-noop-" + siteID, TaskQueue: queue}, noopWorkflowName); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}

	timed := func(f func() error) time.Duration {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	help := func() error {
		cmd := exec.CommandContext(b.Context(), bin, "--help")
		cmd.Env = env
		return cmd.Run()
	}
	dialOnly := func() error {
		dc, err := client.Dial(client.Options{HostPort: temporalAddress})
		if err == nil {
			dc.Close()
		}
		return err
	}
	attrs := func() error {
		_, err := s.MissingSearchAttributes(b.Context())
		return err
	}

	// One of each before the clock starts: connections, pollers, caches,
	// the binary in the page cache.
	viaCLI(site(0, "warm-cli"))
	viaStarter(site(0, "warm-starter"))
	baseline(site(0, "warm-base"))

	var lastCLISite string
	b.ResetTimer()
	for i := range n {
		lastCLISite = site(i, "cli")
		cli = append(cli, viaCLI(lastCLISite))
		inProc = append(inProc, viaStarter(site(i, "starter")))
		base = append(base, baseline(site(i, "base")))
		parts.exec = append(parts.exec, timed(help))
		parts.dial = append(parts.dial, timed(dialOnly))
		parts.attrs = append(parts.attrs, timed(attrs))
	}
	b.StopTimer()
	logTimeline(b, c, workflows.EmbedIncidentID(lastCLISite))
	return cli, inProc, base, parts
}

// logTimeline logs a workflow's history events with their time since the
// first.
func logTimeline(b *testing.B, c client.Client, id string) {
	b.Helper()
	it := c.GetWorkflowHistory(b.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var first time.Time
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		t := ev.GetEventTime().AsTime()
		if first.IsZero() {
			first = t
		}
		b.Logf("%s +%.1fms %s", id, ms(t.Sub(first)), ev.GetEventType())
	}
}
