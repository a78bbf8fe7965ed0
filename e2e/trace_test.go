package e2e

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// TestOneDeliveryTracedEndToEnd follows one lead.created delivery through a
// single trace: the ingress's server span, the relay's dispatch, the
// SignalWithStart, the workflow, the activity, the API call and the
// simulator's handling of it.
func TestOneDeliveryTracedEndToEnd(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tel, err := telemetry.Setup(t.Context(), telemetry.Options{Service: "siteops-e2e", SpanProcessor: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	e := newEnv(t, store.SQLite, simulator.Config{})

	tc := config.Temporal{Address: e.Address, Namespace: e.Namespace, TaskQueue: taskQueue}
	c, _, err := wiring.DialTemporal(t.Context(), tc, slog.New(slog.NewTextHandler(io.Discard, nil)), tel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.StartWorker(t, testenv.WorkerOptions{Telemetry: tel})

	ing := e.StartIngress(t, testenv.IngressOptions{Telemetry: tel})

	s := starter.New(starter.Options{Client: c, TaskQueue: taskQueue, Namespace: e.Namespace})
	if _, err := s.RegisterEndpoint(ctxWithin(t, time.Minute), starter.EndpointRequest{URL: ing.URL + "/webhooks/traced", Events: []string{"lead.created"}}); err != nil {
		t.Fatal(err)
	}
	site := e.site(t, "traced")
	if _, err := e.Sim.CreateLeads(site, 1); err != nil {
		t.Fatal(err)
	}
	siteopstest.Eventually(t, 30*time.Second, "the lead in the store", func() bool {
		n, _ := e.Store.CountLeads(t.Context(), site)
		return n == 1
	})
	_ = c.CancelWorkflow(t.Context(), workflows.LeadSyncID(site), "")

	want := []string{
		"POST /webhooks/{receiver}",
		"relay lead.created",
		"SignalWithStartWorkflow:LeadSync",
		"RunWorkflow:LeadSync",
		"RunActivity:SyncLeads",
		"GET /api/v1/sites/{site_id}/leads",
		"simulator GET /api/v1/sites/" + site + "/leads",
	}
	var names []string
	siteopstest.Eventually(t, 10*time.Second, "every span of the delivery's trace", func() bool {
		spans := rec.Ended()
		var root string
		for _, s := range spans {
			if s.Name() == want[0] {
				root = s.SpanContext().TraceID().String()
			}
		}
		names = names[:0]
		for _, s := range spans {
			if s.SpanContext().TraceID().String() == root {
				names = append(names, s.Name())
			}
		}
		for _, n := range want {
			if !slices.Contains(names, n) {
				return false
			}
		}
		return true
	})
	sort.Strings(names)
	t.Logf("spans of the delivery's trace: %s", strings.Join(names, " | "))
}
