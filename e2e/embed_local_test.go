package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// TestWorkerKilledMidEmbedPatch kills the siteops worker process while the
// incident's PATCH (a local activity, run inside the workflow task) is in
// flight, for embed off and again for embed on, and starts another worker
// each time: each command still returns once the embed has switched, and
// the simulator applied one mutation per idempotency key — the PATCH the
// next worker sends again carries the same key and is answered from the
// stored response.
func TestWorkerKilledMidEmbedPatch(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{Faults: simulator.Faults{Latency: simulator.Duration(1500 * time.Millisecond)}})
	api, _ := agentsite.NewClient(e.SimURL, apiKey)
	cs, err := api.CreateSite(t.Context(), "embed-crash", agentsite.NewSite{Title: "E", Slug: "embed-crash", Type: "business", Template: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	site := cs.Site.ID
	env := append(os.Environ(),
		"TEMPORAL_ADDRESS="+e.Address, "TEMPORAL_NAMESPACE="+e.Namespace, "SITEOPS_TASK_QUEUE="+taskQueue,
		"AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_DATABASE_URL="+e.DBURL,
		"SITEOPS_METRICS_ADDR=", "SITEOPS_OPERATOR=alice")
	startWorker := func() *exec.Cmd {
		t.Helper()
		before := len(e.Sim.Requests())
		cmd := exec.Command(binary, "worker")
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		// The worker checks the API key (two reads) before it polls: no
		// request of theirs is in flight when a PATCH is awaited.
		siteopstest.Eventually(t, 30*time.Second, "the worker's start-up checks", func() bool { return len(e.Sim.Requests()) >= before+2 })
		return cmd
	}
	// killMidPatch waits until the PATCH whose key ends in step is in
	// flight (claimed by the simulator, not yet answered) and kills w.
	killMidPatch := func(w *exec.Cmd, step string) {
		t.Helper()
		siteopstest.Eventually(t, time.Minute, "the "+step+" PATCH in flight", func() bool {
			return e.Sim.InFlight() > 0 && len(patchesFor(e, step)) == 0
		})
		if err := w.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_, _ = w.Process.Wait()
	}
	// command runs siteops in the background; its output comes on the
	// channel when it ends.
	command := func(args ...string) <-chan string {
		out := make(chan string, 1)
		go func() {
			cmd := exec.Command(binary, args...)
			cmd.Env = env
			b, err := cmd.CombinedOutput()
			if err != nil {
				out <- "error: " + err.Error() + ": " + string(b)
				return
			}
			out <- string(b)
		}()
		return out
	}
	wait := func(out <-chan string, want string) {
		t.Helper()
		select {
		case got := <-out:
			if !strings.Contains(got, want) {
				t.Fatalf("command said %q, want %q", got, want)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the command did not return within 2 minutes of the worker's restart")
		}
	}

	// The only worker dies during embed off's PATCH; the next one runs
	// the workflow task again and sends it again.
	first := startWorker()
	off := command("embed", "off", "--site", site, "--reason", "crash test")
	killMidPatch(first, "embed-off")
	second := startWorker()
	wait(off, "is off")
	// The same during embed on's, which reaches the second worker's
	// cache (its sticky queue) first.
	on := command("embed", "on", "--site", site)
	killMidPatch(second, "embed-on")
	startWorker()
	wait(on, "back on")

	for _, step := range []string{"embed-off", "embed-on"} {
		applied, keys := 0, map[string]bool{}
		for _, r := range patchesFor(e, step) {
			keys[r.IdempotencyKey] = true
			if r.Status < 300 && !r.Replayed {
				applied++
			}
		}
		if applied != 1 || len(keys) != 1 {
			t.Errorf("%s: %d applied PATCHes under %d keys (%+v); want one applied under one key", step, applied, len(keys), patchesFor(e, step))
		}
	}
	if s := e.Sim.Sites()[0]; !s.EmbedEnabled {
		t.Errorf("the embed is off after embed on: %+v", s)
	}
}

// patchesFor lists the answered PATCHes whose idempotency key ends in step.
func patchesFor(e *env, step string) []simulator.RequestRecord {
	var out []simulator.RequestRecord
	for _, r := range patches(e) {
		if strings.HasSuffix(r.IdempotencyKey, "/"+step) {
			out = append(out, r)
		}
	}
	return out
}

// failingRestore is the Agent-Site API refusing to turn an embed back on:
// the key lacks agents:write for it (a 403), while turning it off works.
type failingRestore struct{ activities.API }

func (f failingRestore) UpdateAgent(ctx context.Context, key, siteID string, u agentsite.AgentUpdate) (*agentsite.Agent, error) {
	if u.EmbedEnabled != nil && *u.EmbedEnabled {
		return nil, &agentsite.APIError{Method: "PATCH", Path: "/api/v1/sites/" + siteID + "/agent", Status: 403, Code: "insufficient_scope", Message: "this API key lacks the scope agents:write"}
	}
	return f.API.UpdateAgent(ctx, key, siteID, u)
}

// TestEmbedRestoreRefusedByTheAPI: a restore the API refuses is the
// workflow's failure with the API's cause (exit 4 through the binary's
// rules, a *WorkflowFailedError here), not a decision the incident
// refused (*RejectedError).
func TestEmbedRestoreRefusedByTheAPI(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	client, err := wiring.APIClient(config.AgentSite{BaseURL: e.SimURL, APIKey: apiKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := sdkworker.New(e.Client, taskQueue, sdkworker.Options{})
	worker.Register(w, activities.New(activities.Options{API: failingRestore{client}, Store: e.Store, Classes: workflows.ClassOf}))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	cs, err := client.CreateSite(t.Context(), "embed-refused", agentsite.NewSite{Title: "E", Slug: "embed-refused", Type: "business", Template: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Starter.EmbedOff(ctxWithin(t, time.Minute), cs.Site.ID, "alice", "r"); err != nil {
		t.Fatal(err)
	}
	_, err = e.Starter.EmbedOn(ctxWithin(t, time.Minute), cs.Site.ID, nil, "bob")
	var rejected *starter.RejectedError
	var failed *starter.WorkflowFailedError
	if errors.As(err, &rejected) || !errors.As(err, &failed) || failed.Cause.Type != activities.ErrTypeForbidden || !strings.Contains(failed.Cause.Message, "agents:write") {
		t.Fatalf("embed on refused by the API: %T %v; want a *WorkflowFailedError with the 403", err, err)
	}
}

// TestEmbedOffWithoutSearchAttributes opens an incident in a namespace
// that lacks siteops' search attributes: the start that carried them is
// refused, so EmbedOff warns and opens the incident without them.
func TestEmbedOffWithoutSearchAttributes(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	bare := "e2e-bare-embed-" + strings.ReplaceAll(e.Namespace, "e2e-", "")
	if _, err := e.Client.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
		Namespace: bare, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TEMPORAL_ADDRESS="+e.Address, "TEMPORAL_NAMESPACE="+bare, "SITEOPS_TASK_QUEUE="+taskQueue,
		"AGENTSITE_BASE_URL="+e.SimURL, "AGENTSITE_API_KEY="+apiKey, "SITEOPS_DATABASE_URL="+e.DBURL,
		"SITEOPS_METRICS_ADDR=", "SITEOPS_OPERATOR=alice")
	// The worker refuses a namespace without the search attributes unless
	// told to start anyway.
	w := exec.Command(binary, "worker", "--skip-checks")
	w.Env = env
	w.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill(); _, _ = w.Process.Wait() })
	api, _ := agentsite.NewClient(e.SimURL, apiKey)
	cs, err := api.CreateSite(t.Context(), "embed-bare", agentsite.NewSite{Title: "E", Slug: "embed-bare", Type: "business", Template: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	siteopstest.Eventually(t, time.Minute, "the new namespace to take the incident", func() bool {
		cmd := exec.Command(binary, "embed", "off", "--site", cs.Site.ID, "--reason", "bare")
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		out = string(b)
		return err == nil
	})
	if !strings.Contains(out, "is off") || !strings.Contains(out, "lacks the search attributes") || !strings.Contains(out, "SiteopsSiteID") {
		t.Errorf("embed off in a namespace without the search attributes said:\n%s\nwant the embed off and a warning naming them", out)
	}
	if n := len(patches(e)); n != 1 {
		t.Errorf("%d PATCHes, want 1", n)
	}
}
