package e2e

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/webhookingress"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// TestDeliveryAcceptedWhileTemporalIsDown runs the ingress process wiring
// (lazy Temporal client, relay) against a Temporal address where nothing
// listens yet: deliveries are answered at once and dispatched once a server
// comes up there.
func TestDeliveryAcceptedWhileTemporalIsDown(t *testing.T) {
	port, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_down_test"
	// The same parts the ingress process runs on: the store and a lazy
	// Temporal client, as wiring.RunIngress builds them.
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, _, err := wiring.OpenStore(t.Context(), config.Database{URL: storetest.SQLiteURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lazy, _, err := wiring.LazyTemporal(config.Temporal{Address: "127.0.0.1:" + strconv.Itoa(port), Namespace: "default", TaskQueue: taskQueue}, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lazy.Close)
	srv, err := webhookingress.New(webhookingress.ServerOptions{Store: st, Temporal: lazy, TaskQueue: taskQueue, EnvSecrets: []string{secret}, Window: webhook.DefaultWindow, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv.Relay.MaxBackoff = time.Second
	srv.Relay.DispatchTimeout = 2 * time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	body := `{"id":"evt_down_1","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_down","lead_id":"lead_1"}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+ln.Addr().String()+"/webhooks", strings.NewReader(body))
	req.Header.Set("svc-event-id", "evt_down_1")
	req.Header.Set("svc-event-type", "lead.created")
	req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || time.Since(start) > time.Second {
		t.Fatalf("answer %d after %s, want 200 at once", resp.StatusCode, time.Since(start))
	}
	eventually(t, 20*time.Second, "a failed dispatch while Temporal is down", func() bool {
		_, attempts, _ := srv.Store.InboxOutcome(t.Context(), "evt_down_1")
		return attempts >= 1
	})
	if out, _, _ := srv.Store.InboxOutcome(t.Context(), "evt_down_1"); out != "" {
		t.Fatalf("dispatched with Temporal down: %q", out)
	}

	ts, err := devserver.Start(t.Context(), devserver.Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Stop)
	eventually(t, 60*time.Second, "the dispatch after Temporal came back", func() bool {
		out, _, _ := srv.Store.InboxOutcome(t.Context(), "evt_down_1")
		return out == webhookingress.OutcomeSignalled
	})
	d, err := srv.Client.DescribeWorkflowExecution(t.Context(), workflows.LeadSyncID("site_down"), "")
	if err != nil || d.GetWorkflowExecutionInfo().GetType().GetName() != workflows.LeadSyncWorkflowName {
		t.Fatalf("the lead sync was not started: %v", err)
	}
	_ = srv.Client.TerminateWorkflow(t.Context(), workflows.LeadSyncID("site_down"), "", "test over")
}
