// Package demo runs the whole of siteops on one machine and shows it
// working: a Temporal dev server (with its Web UI), the simulator of the
// Agent-Site API, the worker and the ingress on SQLite, driven through the
// same starter library and production wiring that users run.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/wiring"
)

// Options tune a demo run.
type Options struct {
	// Out receives the progress and the summary.
	Out io.Writer
	// Dir keeps the databases and the log; a new temporary directory when
	// empty (removed at the end unless Keep).
	Dir string
	// Keep leaves everything running until ctx is done.
	Keep bool
	// Leads is how many visitor leads each site gets (default 200).
	Leads int
	// Traces, when set, receives every OpenTelemetry span as JSON: one
	// webhook delivery can be followed from the ingress through the relay,
	// the workflow and the activity to the API call.
	Traces io.Writer
}

const (
	apiKey     = "svc_live_demo_key" //nolint:gosec // the simulator's own key, made up for the demo
	adminToken = "demo-admin"
	namespace  = "default"
	taskQueue  = "siteops"
)

// Run runs the demo until its summary, or until ctx is done.
func Run(ctx context.Context, o Options) error {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Leads == 0 {
		o.Leads = 200
	}
	ownDir := o.Dir == ""
	if !ownDir {
		// The lines --keep prints name files here, for any working directory.
		dir, err := filepath.Abs(o.Dir)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		o.Dir = dir
	}
	if ownDir {
		d, err := os.MkdirTemp("", "siteops-demo-")
		if err != nil {
			return err
		}
		o.Dir = d
		if !o.Keep {
			defer func() { _ = os.RemoveAll(d) }()
		}
	}
	logFile, err := os.Create(filepath.Join(o.Dir, "siteops.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	d := &run{o: o, log: slog.New(slog.NewTextHandler(logFile, nil)), logFile: logFile, started: time.Now(), tty: isTerminal(o.Out)}
	defer d.stop()
	if err := d.start(ctx); err != nil {
		return err
	}
	if err := d.story(ctx); err != nil {
		return err
	}
	d.summary()
	if o.Keep {
		lines, err := d.shell()
		if err != nil {
			return err
		}
		d.say("\neverything keeps running (Ctrl-C stops it all):\n  Temporal     %s, HTTP API http://%s, UI %s\n  API          %s/api/v1  (key in %s)\n  ingress      %s  (admin %s)\n  state        %s\n",
			d.temporal.Address, d.temporal.HTTPAddress, d.temporal.UIAddress, d.simURL, filepath.Join(o.Dir, "agentsite-api-key"), d.ingressURL, d.adminURL, o.Dir)
		d.say("\n%s\n\n%s\n\n", ShellHeader, strings.Join(lines, "\n"))
		<-ctx.Done()
	}
	return nil
}

// run is one demo: its components and what it has seen.
type run struct {
	o       Options
	log     *slog.Logger
	logFile *os.File
	started time.Time
	step    int
	tty     bool // progress lines redraw in place

	temporal   *devserver.Server
	codecURL   string // the codec server of the Web UI, when SITEOPS_PAYLOAD_KEY is set
	sim        *simulator.Simulator
	simURL     string
	ingressURL string
	adminURL   string // the ingress's /metrics and /readyz
	dbURL      string
	secretKey  []byte
	payloadKey string // SITEOPS_PAYLOAD_KEY as the demo found it; empty: unencrypted
	endpointID string // the id of the Nexus endpoint, which HTTP callers address

	tel    *telemetry.Telemetry
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error

	store   *store.Store
	starter *starter.Starter
	closers []func()

	facts []fact
}

// fact is one line of the summary.
type fact struct{ what, result string }

func (d *run) say(format string, args ...any) { _, _ = fmt.Fprintf(d.o.Out, format, args...) }

func (d *run) stepf(format string, args ...any) {
	d.step++
	d.say("[%d] %s\n", d.step, fmt.Sprintf(format, args...))
}

func (d *run) start(ctx context.Context) error {
	d.say("siteops demo: every part runs on this machine; state and logs in %s\n\n", d.o.Dir)

	d.stepf("starting the Temporal dev server (pinned temporal CLI %s)", devserver.CLIVersion)
	dsOpts := devserver.Options{UI: true, Log: d.logFile, DBFile: filepath.Join(d.o.Dir, "temporal.db")}
	// With the payload key set, every siteops component encrypts, and the
	// Web UI reads the payloads through a codec server of the demo's own.
	d.payloadKey = os.Getenv("SITEOPS_PAYLOAD_KEY")
	var keyID string
	var err error
	if d.payloadKey != "" {
		if keyID, err = d.startCodecServer(d.payloadKey, &dsOpts); err != nil {
			return err
		}
	}
	d.temporal, err = devserver.Start(ctx, dsOpts)
	if err != nil {
		return err
	}
	d.say("    frontend %s, Web UI %s\n", d.temporal.Address, d.temporal.UIAddress)
	if d.codecURL != "" {
		d.say("    codec server %s: the Web UI decodes the payloads encrypted with SITEOPS_PAYLOAD_KEY (key %s)\n", d.codecURL, keyID)
	}

	d.tel, err = telemetry.Setup(ctx, telemetry.Options{Service: "siteops-demo", StdoutTraces: d.o.Traces})
	if err != nil {
		return err
	}
	compCtx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.errs = make(chan error, 4)

	d.stepf("starting the Agent-Site simulator, the worker and the ingress (SQLite)")
	d.sim, err = simulator.New(simulator.Config{
		Keys: map[string][]string{apiKey: {simulator.ScopeAll}}, AdminToken: adminToken,
		AllowLoopbackReceivers: true, TimeScale: 20, KnowledgeDelay: 3 * time.Second, Seed: uint64(time.Now().UnixNano()), Logger: d.log,
	})
	if err != nil {
		return err
	}
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	d.simURL = "http://" + simLn.Addr().String()
	d.goRun("simulator", func() error { return d.sim.Serve(compCtx, simLn) })

	d.secretKey = make([]byte, 32)
	if _, err := rand.Read(d.secretKey); err != nil {
		return err
	}
	d.dbURL = "sqlite://" + filepath.Join(d.o.Dir, "siteops.db")
	tcfg := config.Temporal{Address: d.temporal.Address, Namespace: namespace, TaskQueue: taskQueue, PayloadKey: d.payloadKey}
	dcfg := config.Database{URL: d.dbURL, SecretKey: base64.StdEncoding.EncodeToString(d.secretKey)}
	// Open the store once first, so that the worker and the ingress start
	// on a migrated schema.
	d.store, _, err = wiring.OpenStore(ctx, dcfg)
	if err != nil {
		return err
	}
	api := config.AgentSite{BaseURL: d.simURL, APIKey: apiKey, AllowLoopback: true, Headroom: agentsite.DefaultHeadroom}
	d.goRun("worker", func() error {
		return wiring.RunWorker(compCtx, wiring.WorkerConfig{Temporal: tcfg, Database: dcfg, AgentSite: api,
			Worker: config.Worker{WorkflowCacheSize: 2000, SecretReconcileEvery: 5 * time.Minute, LeadSweepEvery: time.Hour, KnowledgeRetention: 720 * time.Hour,
				NexusTextQuota: 64 << 20, NexusTextTotal: 1 << 30}}, d.log, d.tel, wiring.Preflight{})
	})
	ps, err := ports.FreeN(2)
	if err != nil {
		return err
	}
	port, adminPort := ps[0], ps[1]
	d.ingressURL = "http://127.0.0.1:" + strconv.Itoa(port)
	d.adminURL = "http://127.0.0.1:" + strconv.Itoa(adminPort)
	d.goRun("ingress", func() error {
		return wiring.RunIngress(compCtx, wiring.IngressConfig{Temporal: tcfg, Database: dcfg,
			Ingress: ingressSettings(port, adminPort)}, d.log, d.tel, wiring.Preflight{})
	})

	var closeStarter func()
	d.starter, closeStarter, err = wiring.Starter(ctx, tcfg, &dcfg, d.log)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, closeStarter)
	if err := d.waitFor(ctx, 20*time.Second, "the ingress to be ready", func() bool { return d.get(ctx, d.adminURL+"/readyz") == nil }); err != nil {
		return err
	}
	d.say("    simulator %s/api/v1, ingress %s, log %s\n", d.simURL, d.ingressURL, d.logFile.Name())
	return nil
}

// startCodecServer serves the codec server of `siteops codec-server` on a
// free loopback port for the Web UI that opts will start: the browser
// calls it from the UI's page, without a token (the dev server's UI does
// not pass one on), so it serves only its own loopback Host names and the
// UI's origin (by address and as localhost). It returns the key's ID.
func (d *run) startCodecServer(payloadKey string, opts *devserver.Options) (string, error) {
	keys, err := codec.ParseKeyRing(payloadKey)
	if err != nil {
		return "", err
	}
	cd, err := codec.New(codec.Options{Keys: keys})
	if err != nil {
		return "", err
	}
	if opts.UIPort, err = ports.Free(); err != nil {
		return "", err
	}
	origins := []string{fmt.Sprintf("http://127.0.0.1:%d", opts.UIPort), fmt.Sprintf("http://localhost:%d", opts.UIPort)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	h, err := codec.NewHandler(codec.HandlerOptions{Codec: cd, Hosts: codec.LocalHosts(ln.Addr().String()), Origins: origins, Logger: d.log})
	if err != nil {
		_ = ln.Close()
		return "", err
	}
	srv := codec.NewServer(h)
	// Not in d.wg: stop waits for d.wg before the closers, and Shutdown,
	// a closer, is what ends Serve.
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("codec server failed", "error", err)
		}
	}()
	d.closers = append(d.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	d.codecURL = "http://" + ln.Addr().String()
	opts.UICodecEndpoint = d.codecURL
	return cd.KeyID(), nil
}

// goRun runs a component until the demo stops; its failure ends the demo.
func (d *run) goRun(name string, f func() error) {
	d.wg.Go(func() {
		if err := f(); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Error("component failed", "component", name, "error", err)
			select {
			case d.errs <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	})
}

// stop ends every component and the dev server.
func (d *run) stop() {
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	for _, f := range d.closers {
		f()
	}
	if d.store != nil {
		_ = d.store.Close()
	}
	if d.temporal != nil {
		d.temporal.Stop()
	}
	if d.tel != nil {
		_ = d.tel.Shutdown(context.Background())
	}
}

// waitFor polls cond every 50 ms until it holds, the deadline passes, a
// component fails, or ctx is done.
func (d *run) waitFor(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		select {
		case err := <-d.errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s; see %s", within, what, d.logFile.Name())
		}
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ingressSettings are the demo ingress's settings: the binary's defaults
// (demo_test.go holds them to config's) on the given loopback ports.
func ingressSettings(port, adminPort int) config.Ingress {
	return config.Ingress{Addr: "127.0.0.1:" + strconv.Itoa(port), AdminAddr: "127.0.0.1:" + strconv.Itoa(adminPort),
		MaxConcurrent: 64, MaxConnections: 2048, ShedBusyAfter: time.Second, MaxBody: 256 << 10,
		ReplayWindow: 5 * time.Minute, InboxRetention: 720 * time.Hour,
		RefusedRetention: 168 * time.Hour, RefusedMaxRows: 10_000}
}
