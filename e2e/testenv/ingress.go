package testenv

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/telemetry/telemetrytest"
	"github.com/siteops/siteops/wiring"
)

// IngressOptions are what a test sets of the ingress StartIngress runs, as
// the variables of `siteops ingress` would; the zero value runs it with
// the binary's defaults.
type IngressOptions struct {
	// WebhookSecrets are accepted on POST /webhooks
	// (SITEOPS_WEBHOOK_SECRETS).
	WebhookSecrets []string
	// Logger receives the ingress's log. When nil the log is kept and
	// printed if the test fails.
	Logger *slog.Logger
	// Telemetry, when set, is the process's telemetry (its spans and
	// metrics), as `siteops ingress` sets it up.
	Telemetry *telemetry.Telemetry
	// LeadShards is SITEOPS_LEAD_SHARDS (0: a lead sync per site).
	LeadShards int
}

// Ingress is an ingress that StartIngress runs.
type Ingress struct {
	// URL is the webhook port's base URL; AdminURL the admin address's
	// (/metrics, /readyz).
	URL, AdminURL string
	cancel        context.CancelFunc
	done          chan struct{}
	err           error // wiring.RunIngress's, once done is closed
	stopOnce      sync.Once
}

var ingresses atomic.Int64

// StartIngress runs the siteops ingress on the env as `siteops ingress`
// runs it — wiring.RunIngress, with its own store connection, a lazy
// Temporal client, its start-up checks, the relay and the record of
// refusals — on free loopback ports with the store's secret key. It
// returns once /readyz answers 200, and stops it when the test ends (or
// at Stop), failing the test if it ended with an error.
func (e *Env) StartIngress(tb testing.TB, o IngressOptions) *Ingress {
	tb.Helper()
	ps, err := ports.FreeN(2)
	if err != nil {
		tb.Fatal(err)
	}
	in := &Ingress{URL: fmt.Sprintf("http://127.0.0.1:%d", ps[0]), AdminURL: fmt.Sprintf("http://127.0.0.1:%d", ps[1]), done: make(chan struct{})}
	ing := IngressDefaults()
	ing.Addr, ing.AdminAddr = fmt.Sprintf("127.0.0.1:%d", ps[0]), fmt.Sprintf("127.0.0.1:%d", ps[1])
	ing.WebhookSecrets = strings.Join(o.WebhookSecrets, ",")
	ing.LeadShards = o.LeadShards
	cfg := wiring.IngressConfig{
		Temporal: config.Temporal{Address: e.Address, Namespace: e.Namespace, TaskQueue: e.TaskQueue,
			Identity: fmt.Sprintf("testenv-ingress-%d", ingresses.Add(1))},
		Database: config.Database{URL: e.DBURL, SecretKey: base64.StdEncoding.EncodeToString(storetest.TestKey)},
		Ingress:  ing,
	}
	logger, log := o.Logger, (*siteopstest.Log)(nil)
	if logger == nil {
		log = &siteopstest.Log{}
		logger = slog.New(slog.NewTextHandler(log, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() {
		defer close(in.done)
		in.err = wiring.RunIngress(ctx, cfg, logger, o.Telemetry, wiring.Preflight{})
	}()
	tb.Cleanup(func() {
		if err := in.Stop(); err != nil {
			tb.Errorf("ingress %s: ended with %v; want it to stop cleanly%s", in.URL, err, tail(log))
		} else if tb.Failed() && log != nil {
			tb.Logf("ingress %s:%s", in.URL, tail(log))
		}
	})
	siteopstest.EventuallyNil(tb, PollWithin, "ingress "+in.URL+" to be ready", func() error {
		select {
		case <-in.done:
			tb.Fatalf("ingress %s: ended before it was ready: %v%s", in.URL, in.err, tail(log))
		default:
		}
		_, code, err := get(tb.Context(), in.AdminURL+"/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/readyz answered %d", code)
		}
		return err
	})
	return in
}

// Metrics reads the ingress's /metrics, the handler's and the relay's.
func (in *Ingress) Metrics(tb testing.TB) map[string]*dto.MetricFamily {
	tb.Helper()
	body, code, err := get(tb.Context(), in.AdminURL+"/metrics")
	if err != nil || code != http.StatusOK {
		tb.Fatalf("GET %s/metrics: %d, %v", in.AdminURL, code, err)
	}
	return telemetrytest.Families(tb, body)
}

// Stop stops the ingress as SIGTERM stops `siteops ingress` and waits
// until it has. It returns the error the ingress ended with, nil for a
// clean stop; it does its work once.
func (in *Ingress) Stop() error {
	in.stopOnce.Do(func() {
		in.cancel()
		<-in.done
		if errors.Is(in.err, context.Canceled) {
			in.err = nil // stopped during its start-up checks
		}
	})
	return in.err
}

// get GETs url with a short deadline.
func get(ctx context.Context, url string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b), resp.StatusCode, err
}

// IngressDefaults are the settings of config.Ingress that `siteops
// ingress` runs with when no variable sets them (a test holds the two
// together).
func IngressDefaults() config.Ingress {
	return config.Ingress{
		Addr:             ":8088",
		AdminAddr:        "127.0.0.1:9091",
		MaxConcurrent:    64,
		MaxConnections:   2048,
		ShedBusyAfter:    time.Second,
		MaxBody:          262144,
		ReplayWindow:     300 * time.Second,
		InboxRetention:   720 * time.Hour,
		RefusedRetention: 168 * time.Hour,
		RefusedMaxRows:   10000,
	}
}
