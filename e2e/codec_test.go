package e2e

import (
	"encoding/base64"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/codec"
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
// server holds only ciphertext, in the current format, bound to the
// namespace: a codec of another namespace with the same key refuses it.
func TestPayloadEncryption(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	rawKey := []byte("payload-key-for-e2e-0123456789ab")
	key := base64.StdEncoding.EncodeToString(rawKey)
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
	var input *commonpb.Payload
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		raw.WriteString(ev.String())
		if in := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads(); input == nil && len(in) > 0 {
			input = in[0]
		}
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
	if input == nil {
		t.Fatal("the history has no workflow input")
	}
	if got := string(input.GetMetadata()["encryption-namespace"]); got != e.ns {
		t.Errorf("the input is bound to namespace %q, want %q", got, e.ns)
	}
	for ns, wantErr := range map[string]bool{e.ns: false, "another-namespace": true} {
		c, err := codec.New(rawKey, codec.WithNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Decode([]*commonpb.Payload{input}); (err != nil) != wantErr {
			t.Errorf("the input read in namespace %s: %v, want an error: %v", ns, err, wantErr)
		}
	}
}
