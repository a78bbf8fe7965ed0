package e2e

import (
	"encoding/base64"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// TestPayloadEncryption onboards a site with SITEOPS_PAYLOAD_KEY set for
// the worker and the starter: the result reads back, and the history on the
// server holds only ciphertext, in the current format.
func TestPayloadEncryption(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	key := base64.StdEncoding.EncodeToString([]byte("payload-key-for-e2e-0123456789ab"))
	tc := config.Temporal{Address: server.Address, Namespace: e.ns, TaskQueue: taskQueue, PayloadKey: key}
	c, _, err := wiring.DialTemporal(t.Context(), tc, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	api, _ := agentsite.NewClient(e.simURL, apiKey)
	w := sdkworker.New(c, taskQueue, sdkworker.Options{})
	worker.Register(w, activities.New(api, e.store))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := &starter.Starter{Client: c, Texts: e.store, TaskQueue: taskQueue}
	o, err := s.Onboard(t.Context(), prepare(t, "../examples/bayside-dental.json", "bayside"))
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := o.Run.Get(ctxWithin(t, time.Minute), &res); err != nil || res.Status != "published" {
		t.Fatalf("result %+v, %v", res, err)
	}
	// The plain client (no key) sees ciphertext only.
	it := e.client.GetWorkflowHistory(t.Context(), o.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var raw strings.Builder
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		raw.WriteString(ev.String())
	}
	for _, plain := range []string{"Bayside Dental", "baysidedental.example", "Gentle dentistry"} {
		if strings.Contains(raw.String(), plain) {
			t.Errorf("history holds %q in the clear", plain)
		}
	}
	if !strings.Contains(raw.String(), "binary/encrypted") {
		t.Errorf("history has no encrypted payloads")
	}
	// The worker and the starter write the current format, whose outer
	// metadata is authenticated.
	if !strings.Contains(raw.String(), "encryption-version") {
		t.Errorf("history has no payloads of encryption version 2")
	}
}
