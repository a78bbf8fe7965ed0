package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/relay"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
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
	srv, err := ingress.New(ingress.ServerOptions{Store: st, Temporal: lazy, TaskQueue: taskQueue, EnvSecrets: []string{secret}, Window: webhook.DefaultWindow, Logger: logger,
		Relay: relay.Options{MaxBackoff: time.Second, DispatchTimeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
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
	if bound := siteopstest.Bound(time.Second); resp.StatusCode != 200 || time.Since(start) > bound {
		t.Fatalf("answer %d after %s, want 200 at once (within %s)", resp.StatusCode, time.Since(start), bound)
	}
	siteopstest.Eventually(t, 20*time.Second, "a failed dispatch while Temporal is down", func() bool {
		_, attempts, _ := srv.Store.InboxOutcome(t.Context(), "evt_down_1")
		return attempts >= 1
	})
	if out, _, _ := srv.Store.InboxOutcome(t.Context(), "evt_down_1"); out != "" {
		t.Fatalf("dispatched with Temporal down: %q", out)
	}
	if d, err := srv.Store.Event(t.Context(), "evt_down_1"); err != nil || !strings.Contains(d.LastError, "Temporal is unavailable") || !strings.Contains(d.LastError, "connection refused") {
		t.Errorf("the event's last error does not name the cause: %q (%v)", d.LastError, err)
	}

	testenv.DevServer(t, devserver.Options{Port: port})
	siteopstest.Eventually(t, 60*time.Second, "the dispatch after Temporal came back", func() bool {
		out, _, _ := srv.Store.InboxOutcome(t.Context(), "evt_down_1")
		return out == store.OutcomeSignalled
	})
	d, err := srv.Client.DescribeWorkflow(t.Context(), workflows.LeadSyncID("site_down"), "")
	if err != nil || d.RawResponse.GetWorkflowExecutionInfo().GetType().GetName() != workflows.LeadSyncWorkflowName {
		t.Fatalf("the lead sync was not started: %v", err)
	}
	_ = srv.Client.TerminateWorkflow(t.Context(), workflows.LeadSyncID("site_down"), "", "test over")
}

// outage is what an outageProxy does to the calls it does not spare.
type outage int

const (
	passThrough outage = iota
	// blackhole never answers: the client's own deadline ends the call,
	// as with a frontend whose history service is down or a network that
	// drops packets.
	blackhole
	// refuse answers Unavailable at once, as a frontend does that cannot
	// reach its history service.
	refuse
)

// refusal is what the proxy says when it refuses a call.
const refusal = "history service unavailable (test outage)"

// outageProxy is a plaintext gRPC front for a dev server's frontend that
// plays a Temporal outage: between start and end it blackholes or refuses
// every call but those it spares (GetSystemInfo and the health check, when
// only the history service is down), and forwards the rest unchanged
// (authProxy.forward). Tests point the CLI at it; the worker keeps its
// direct connection.
type outageProxy struct {
	addr      string
	mode      outage
	start     time.Time
	end       time.Time // zero: the outage lasts
	spare     func(method string) bool
	swallowed atomic.Int64 // calls the outage blackholed or refused
}

// frontendOnly spares the calls a frontend answers by itself, so that a
// client connects and then finds every workflow call unanswered.
func frontendOnly(method string) bool {
	return strings.HasSuffix(method, "/GetSystemInfo") || strings.HasPrefix(method, "/grpc.health.")
}

func startOutageProxy(t *testing.T, upstreamAddr string, mode outage, lasts time.Duration, spare func(string) bool) *outageProxy {
	t.Helper()
	upstream, err := grpc.NewClient(upstreamAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p := &outageProxy{mode: mode, start: time.Now(), spare: spare}
	if lasts > 0 {
		p.end = p.start.Add(lasts)
	}
	if p.spare == nil {
		p.spare = func(string) bool { return false }
	}
	fwd := &authProxy{auths: map[string]int{}}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, in grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(in)
		if p.mode == passThrough || p.spare(method) || (!p.end.IsZero() && time.Now().After(p.end)) {
			return fwd.forward(in, upstream)
		}
		p.swallowed.Add(1)
		if p.mode == refuse {
			return grpcstatus.Error(grpccodes.Unavailable, refusal)
		}
		<-in.Context().Done()
		return in.Context().Err()
	}))
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); _ = upstream.Close() })
	return p
}

// errorJSONLine is the error -o json writes to standard error.
type errorJSONLine struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// TestCLISaysTemporalIsUnavailable runs commands against a Temporal that
// does not answer, answers Unavailable, or is not there at all: each ends
// within its --timeout with exit 5 and one error naming Temporal's address,
// what was tried and the cause, and no secret.
func TestCLISaysTemporalIsUnavailable(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{})
	stopped, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		address func(t *testing.T) string
		args    []string
		timeout time.Duration
		want    []string
	}{
		{"history down: workflow calls get no answer",
			func(t *testing.T) string { return startOutageProxy(t, e.Address, blackhole, 0, frontendOnly).addr },
			[]string{"onboard", "-f", "../examples/bayside-dental.json", "--wait"}, 6 * time.Second,
			[]string{"is unavailable", "starting onboarding/bayside-dental", "no answer within", "temporal operator cluster health"}},
		{"the frontend answers Unavailable",
			func(t *testing.T) string { return startOutageProxy(t, e.Address, refuse, 0, frontendOnly).addr },
			[]string{"status", "onboarding/bayside-dental"}, 4 * time.Second,
			[]string{"is unavailable", "reading onboarding/bayside-dental", "Unavailable", refusal}},
		{"the whole server blackholed: the connection hangs",
			func(t *testing.T) string { return startOutageProxy(t, e.Address, blackhole, 0, nil).addr },
			[]string{"embed", "off", "--site", "site_1", "--reason", "test"}, 7 * time.Second,
			[]string{"is unavailable", "connecting failed", "no answer within"}},
		{"a stopped server: connection refused",
			func(*testing.T) string { return "127.0.0.1:" + strconv.Itoa(stopped) },
			[]string{"secret", "proceed", "--endpoint", "we_1"}, 3 * time.Second,
			[]string{"is unavailable", "connecting failed", "connection refused", "TEMPORAL_ADDRESS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			address := tc.address(t)
			args := append(tc.args, "--timeout", tc.timeout.String(), "-o", "json")
			began := time.Now()
			stdout, stderr, code := e.runSplit(t, []string{"TEMPORAL_ADDRESS=" + address}, "", args...)
			took := time.Since(began)
			if code != 5 {
				t.Fatalf("siteops %s: exit %d, want 5 (unavailable)\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
			}
			var got errorJSONLine
			if err := json.Unmarshal([]byte(stderr), &got); err != nil || got.ExitCode != 5 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Fatalf("standard error is not one JSON error with exit_code 5 (%v):\n%s", err, stderr)
			}
			for _, want := range append([]string{"Temporal at " + address}, tc.want...) {
				if !strings.Contains(got.Error, want) {
					t.Errorf("the error lacks %q:\n%s", want, got.Error)
				}
			}
			if took < tc.timeout-500*time.Millisecond || took > tc.timeout+8*time.Second {
				t.Errorf("gave up after %s, want about --timeout %s (retrying until then)", took.Round(time.Millisecond), tc.timeout)
			}
			if strings.Contains(stdout+stderr, apiKey) || strings.Contains(stdout+stderr, "whsec_") {
				t.Errorf("the output holds a secret:\n%s%s", stdout, stderr)
			}
			t.Logf("after %s: %s", took.Round(time.Millisecond), got.Error)
		})
	}
}

// TestCLIRidesOutAShortTemporalOutage blackholes Temporal for 3 s, shorter
// than --timeout: the command retries (the connection when the whole
// server hangs, the start when only the history service does) and
// succeeds.
func TestCLIRidesOutAShortTemporalOutage(t *testing.T) {
	t.Parallel() // it mostly waits (main_test.go)
	e := newEnv(t, store.SQLite, simulator.Config{})
	e.startWorker(t)
	for i, tc := range []struct {
		name  string
		spare func(string) bool
	}{
		{"the whole server", nil},
		{"the history service", frontendOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const outageFor = 3 * time.Second
			spec := filepath.Join(t.TempDir(), "spec.json")
			b, err := os.ReadFile("../examples/bayside-dental.json")
			if err != nil {
				t.Fatal(err)
			}
			slug := "ride-out-" + strconv.Itoa(i)
			if err := os.WriteFile(spec, []byte(strings.Replace(string(b), `"bayside-dental"`, `"`+slug+`"`, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startOutageProxy(t, e.Address, blackhole, outageFor, tc.spare)
			began := time.Now()
			stdout, stderr, code := e.runSplit(t, []string{"TEMPORAL_ADDRESS=" + p.addr}, "", "onboard", "-f", spec, "--wait", "--timeout", "60s", "-o", "json")
			took := time.Since(began)
			var res workflows.OnboardingResult
			if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || res.Status != "published" {
				t.Fatalf("onboard through a %s outage: exit %d\nstdout: %s\nstderr: %s", outageFor, code, stdout, stderr)
			}
			if p.swallowed.Load() == 0 || took < outageFor {
				t.Errorf("the outage swallowed %d call(s) and the command took %s: it never met the outage", p.swallowed.Load(), took)
			}
			if stderr != "" {
				t.Errorf("standard error (not a terminal) holds more than the outcome:\n%s", stderr)
			}
			t.Logf("published after %s; %d call(s) swallowed", took.Round(time.Millisecond), p.swallowed.Load())
		})
	}
}

// TestRelayLastErrorNamesTemporalThatDoesNotAnswer relays an event through
// a Temporal that accepts connections and never answers: the event's last
// error says that Temporal did not answer within the dispatch timeout, not
// only "context deadline exceeded".
func TestRelayLastErrorNamesTemporalThatDoesNotAnswer(t *testing.T) {
	p := startOutageProxy(t, server(0).Address, blackhole, 0, frontendOnly)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, _, err := wiring.OpenStore(t.Context(), config.Database{URL: storetest.SQLiteURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	lazy, _, err := wiring.LazyTemporal(config.Temporal{Address: p.addr, Namespace: "default", TaskQueue: taskQueue}, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lazy.Close)
	const secret = "whsec_blackhole_test"
	srv, err := ingress.New(ingress.ServerOptions{Store: st, Temporal: lazy, TaskQueue: taskQueue, EnvSecrets: []string{secret}, Window: webhook.DefaultWindow, Logger: logger,
		Relay: relay.Options{MaxBackoff: time.Second, DispatchTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ctx, ln) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	body := `{"id":"evt_hole_1","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_hole","lead_id":"lead_1"}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+ln.Addr().String()+"/webhooks", strings.NewReader(body))
	req.Header.Set("svc-event-id", "evt_hole_1")
	req.Header.Set("svc-event-type", "lead.created")
	req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("answer %d, want 200", resp.StatusCode)
	}
	siteopstest.Eventually(t, 20*time.Second, "a failed dispatch", func() bool {
		_, attempts, _ := st.InboxOutcome(t.Context(), "evt_hole_1")
		return attempts >= 1
	})
	d, err := st.Event(t.Context(), "evt_hole_1")
	if err != nil || !strings.Contains(d.LastError, "signalling lead-sync/site_hole") || !strings.Contains(d.LastError, "Temporal did not answer within 1s") {
		t.Errorf("the event's last error does not name the cause: %q (%v)", d.LastError, err)
	}
	t.Logf("last error: %s", d.LastError)
}
