package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/starter"
)

// Preflight says what a process does with the checks of package doctor at
// start. The rule: refuse only what no retry can fix (a wrong key, a
// missing namespace, a secret key that reads none of the stored secrets);
// retry a transient failure (the API answering 5xx or 429, Temporal or the
// database not answering yet) for Patience, then start degraded; start
// degraded on a partial one (one stored secret of two unreadable). A
// degraded process says so in its log, in siteops_check_ok and on
// /readyz, and checks again every RecheckEvery until the check passes.
type Preflight struct {
	// Skip starts the process although a check failed, logging each
	// failure loudly.
	Skip bool
	// Patience is how long transient failures are retried before the
	// process starts degraded; DefaultPatience when zero.
	Patience time.Duration
	// RecheckEvery is how often a degraded process runs a failing check
	// again; DefaultRecheckEvery when zero.
	RecheckEvery time.Duration
}

// The defaults of Preflight.
const (
	DefaultPatience     = 30 * time.Second
	DefaultRecheckEvery = 30 * time.Second
)

// PreflightError is a check that stopped a process from starting.
type PreflightError struct {
	Process string
	Result  doctor.Result
}

func (e *PreflightError) Error() string {
	return fmt.Sprintf("the %s does not start: %s check failed: %s (no retry fixes this: fix it, or start with --skip-checks)", e.Process, e.Result.Check, e.Result.Detail)
}

func (e *PreflightError) Unwrap() error { return e.Result.Err }

// check is one check a process runs, again and again while it fails.
type check func(ctx context.Context) doctor.Result

// Checks holds the latest result of every check a running process made:
// what its /readyz answers and siteops_check_ok{check} exports.
type Checks struct {
	mu    sync.Mutex
	order []string
	last  map[string]doctor.Result
}

// NewChecks returns an empty set of results, exported through meters as
// the gauge siteops_check_ok{check} (1 passing, 0 failing) when meters is
// not nil.
func NewChecks(meters metric.MeterProvider) *Checks {
	c := &Checks{last: map[string]doctor.Result{}}
	if meters == nil {
		return c
	}
	g, err := meters.Meter("github.com/siteops/siteops/wiring").Int64ObservableGauge("siteops.check.ok",
		metric.WithDescription("1 while a start-up check of this process passes (or is skipped), 0 while it fails; a process that runs with a failing check is degraded and says why on /readyz."))
	if err != nil {
		return c
	}
	_, _ = meters.Meter("github.com/siteops/siteops/wiring").RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, r := range c.Results() {
			v := int64(1)
			if r.Status == doctor.Fail {
				v = 0
			}
			o.ObserveInt64(g, v, metric.WithAttributes(checkAttr(r.Check)))
		}
		return nil
	}, g)
	return c
}

// set records a check's latest result.
func (c *Checks) set(r doctor.Result) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, seen := c.last[r.Check]; !seen {
		c.order = append(c.order, r.Check)
	}
	c.last[r.Check] = r
}

// Results returns the latest result of every check, in the order they
// were first run.
func (c *Checks) Results() []doctor.Result {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]doctor.Result, 0, len(c.order))
	for _, name := range c.order {
		out = append(out, c.last[name])
	}
	return out
}

// Degraded reports whether any check fails.
func (c *Checks) Degraded() bool {
	_, failed := doctor.Failed(c.Results())
	return failed
}

// Readiness answers /readyz: 503 while a check in essential fails (what
// the process cannot do its work without), 200 otherwise, with every
// check's state as JSON ("degraded" when any fails).
func (c *Checks) Readiness(essential ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		results := c.Results()
		status, code := "ok", http.StatusOK
		for _, r := range results {
			if r.Status != doctor.Fail {
				continue
			}
			status = "degraded"
			for _, e := range essential {
				if r.Check == e {
					status, code = "unavailable", http.StatusServiceUnavailable
				}
			}
		}
		if results == nil {
			results = []doctor.Result{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "checks": results})
	})
}

// start runs every check, retries the transient failures for p.Patience,
// then refuses on a failure no retry fixes (unless p.Skip) or starts:
// checks that still fail are logged as degrading the process and run
// again every p.RecheckEvery, in the background, until they pass. A check
// whose result is marked Watch (the secret key: secrets are stored and
// changed while the process runs) runs again every p.RecheckEvery for as
// long as the process runs, passing or not.
func (p Preflight) start(ctx context.Context, process string, logger *slog.Logger, into *Checks, checks ...check) error {
	patience, every := p.Patience, p.RecheckEvery
	if patience == 0 {
		patience = DefaultPatience
	}
	if every == 0 {
		every = DefaultRecheckEvery
	}
	results := make([]doctor.Result, len(checks))
	for i, c := range checks {
		results[i] = c(ctx)
	}
	deadline := time.Now().Add(patience)
	for wait := time.Second; ; wait = min(2*wait, 8*time.Second) {
		var transient []int
		for i, r := range results {
			if r.Status == doctor.Fail && r.Transient {
				transient = append(transient, i)
			}
		}
		left := time.Until(deadline)
		if len(transient) == 0 || left <= 0 {
			break
		}
		wait = min(wait, left)
		for _, i := range transient {
			logger.Warn("check failed, transient; retrying", "check", results[i].Check, "detail", results[i].Detail, "retry_in", wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		for _, i := range transient {
			results[i] = checks[i](ctx)
		}
	}
	for _, r := range results {
		into.set(r)
		switch {
		case r.Status == doctor.OK:
			logger.Info("check passed", "check", r.Check, "detail", r.Detail)
		case r.Status == doctor.Warn:
			logger.Warn("check warns", "check", r.Check, "detail", r.Detail)
		case r.Status == doctor.Skip:
			logger.Info("check skipped", "check", r.Check, "detail", r.Detail)
		case r.Refuses() && p.Skip:
			logger.Error("CHECK FAILED; starting anyway (--skip-checks)", "check", r.Check, "detail", r.Detail)
		case r.Refuses():
			return &PreflightError{Process: process, Result: r}
		default:
			why := "part of what it checks works"
			if r.Transient {
				why = fmt.Sprintf("it still failed after %s of retries; the %s retries the work that needs it", patience, process)
			}
			logger.Warn("STARTING DEGRADED: a check fails; checking again in the background", "check", r.Check, "detail", r.Detail,
				"why", why, "recheck_every", every)
		}
	}
	for i, c := range checks {
		switch {
		case results[i].Watch:
			go p.watch(ctx, logger, into, c, results[i], every, false)
		case results[i].Status == doctor.Fail:
			go p.watch(ctx, logger, into, c, results[i], every, true)
		}
	}
	return nil
}

// watch runs a check every period, keeping its latest result in into,
// and says when it starts failing (again, or with another cause) and when
// it passes again: for as long as ctx lasts, or, with untilPass, until it
// passes (a failing check that is not watched). A running process refuses
// nothing: a check that starts failing degrades it, whatever the failure.
func (p Preflight) watch(ctx context.Context, logger *slog.Logger, into *Checks, c check, last doctor.Result, every time.Duration, untilPass bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		r := c(ctx)
		if ctx.Err() != nil {
			return
		}
		into.set(r)
		failing, wasFailing := r.Status == doctor.Fail, last.Status == doctor.Fail
		switch {
		case failing && (!wasFailing || r.Detail != last.Detail):
			logger.Warn("DEGRADED: a check fails now; checking again in the background", "check", r.Check, "detail", r.Detail, "recheck_every", every)
		case !failing && wasFailing:
			logger.Info("check passes again; no longer degraded by it", "check", r.Check, "detail", r.Detail)
			if untilPass {
				return
			}
		}
		last = r
	}
}

// checkAttr is the check label of siteops_check_ok: the check's name in
// lower case, each run of other characters one underscore ("secret key"
// is secret_key, "agent-site api" agent_site_api), as label values are
// written.
func checkAttr(name string) attribute.KeyValue {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if under && b.Len() > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
			under = false
			continue
		}
		under = true
	}
	return attribute.String("check", b.String())
}

// Diagnose runs every check of `siteops doctor` that the settings in the
// environment allow, in its order; t is the Temporal settings with the
// command's flags applied, or tErr why they cannot be read. It changes
// nothing: the store is opened read-only and as it is (InspectStore), so
// that what it reports is what the other commands will find.
func Diagnose(ctx context.Context, t config.Temporal, tErr error) []doctor.Result {
	var (
		results []doctor.Result
		cfg     struct {
			config.AgentSite
			config.Database
			config.Ingress
			config.Worker
			config.Log
		}
	)
	add := func(r doctor.Result) { results = append(results, r) }
	if err := config.Load(&cfg); err != nil {
		return []doctor.Result{doctor.Invalid("configuration", err)}
	}
	if err := cfg.Log.Validate(); err != nil {
		add(doctor.Invalid("configuration", err))
	}

	if tErr != nil {
		add(doctor.Invalid("temporal", tErr))
		add(doctor.Skipped("search attributes", "the Temporal settings are wrong"))
	} else if cl, conn, err := DialTemporal(ctx, t, slog.New(slog.DiscardHandler), nil); err != nil {
		add(doctor.Result{Check: "temporal", Status: doctor.Fail, Detail: err.Error(), Err: err})
		add(doctor.Skipped("search attributes", "Temporal is not reachable"))
	} else {
		add(doctor.Temporal(ctx, cl, conn.String(), conn.Namespace))
		add(doctor.SearchAttributes(ctx, starter.New(starter.Options{Client: cl, Namespace: conn.Namespace})))
		cl.Close()
	}

	if cfg.BaseURL == "" && cfg.APIKey == "" {
		add(doctor.Skipped("agent-site api", "AGENTSITE_BASE_URL and AGENTSITE_API_KEY are not set (the worker and `webhook list` need them)"))
	} else if api, err := APIClient(cfg.AgentSite, nil); err != nil {
		add(doctor.Invalid("agent-site api", err))
	} else {
		add(doctor.APIKey(ctx, api))
	}
	add(doctor.PublicURL(cfg.PublicURL, cfg.AllowLoopback))
	add(doctor.BuildID(cfg.Worker))

	if st, where, err := InspectStore(ctx, cfg.Database); err != nil {
		add(doctor.Result{Check: "database", Status: doctor.Fail, Detail: err.Error(), Err: err})
		add(doctor.Skipped("secret key", "the database cannot be read"))
	} else {
		db := doctor.Database(ctx, st, where)
		add(db)
		if db.Status == doctor.OK || db.Status == doctor.Warn {
			add(doctor.SecretKey(ctx, st))
			add(doctor.Connections(ctx, st))
		} else {
			add(doctor.Skipped("secret key", "the database is not ready"))
			add(doctor.Skipped("database connections", "the database is not ready"))
		}
		_ = st.Close()
	}
	add(doctor.Address(ctx, "SITEOPS_METRICS_ADDR", cfg.MetricsAddr))
	add(doctor.Address(ctx, "SITEOPS_INGRESS_ADDR", cfg.Addr))
	return results
}
