package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/siteops/siteops/activities"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/doctor"
	"github.com/siteops/siteops/ingress"
	sitenexus "github.com/siteops/siteops/nexus"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/telemetry"
	"github.com/siteops/siteops/worker"
	"github.com/siteops/siteops/workflows"
)

// WorkerConfig is everything a worker process reads from the environment.
type WorkerConfig struct {
	config.Temporal
	config.AgentSite
	config.Database
	config.Worker
}

// RunWorker assembles a worker process — its metrics endpoint, the store,
// the API client and the Temporal client — and runs it until ctx is done.
// tel, when given, traces workflows and activities and serves the metrics.
//
// It checks its settings first and says where its store and Temporal are
// before it opens, listens on or dials anything. Before it polls, it runs
// the checks of package doctor that concern it — Temporal and its
// namespace, the search attributes, the API key, the database and the
// secret key — and refuses to start on a failure unless pre.Skip.
func RunWorker(ctx context.Context, cfg WorkerConfig, logger *slog.Logger, tel *telemetry.Telemetry, pre Preflight) error {
	if cfg.WorkflowCacheSize <= 0 {
		return config.Invalid("SITEOPS_WORKFLOW_CACHE_SIZE=%d must be a positive number of workflows", cfg.WorkflowCacheSize)
	}
	if cfg.SecretReconcileEvery <= 0 {
		return config.Invalid("SITEOPS_SECRET_RECONCILE_EVERY=%s must be a positive duration, e.g. 5m", cfg.SecretReconcileEvery)
	}
	if cfg.LeadSweepEvery <= 0 {
		return config.Invalid("SITEOPS_LEAD_SWEEP_EVERY=%s must be a positive duration, e.g. 1h", cfg.LeadSweepEvery)
	}
	if err := cfg.AgentSite.Validate(); err != nil {
		return err
	}
	receivers, err := activities.ParseReceiverPolicy(cfg.PublicURL, cfg.AllowLoopback)
	if err != nil {
		return config.Invalid("%v", err)
	}
	if cfg.NexusTextQuota < 0 || cfg.NexusTextTotal < 0 || cfg.NexusSharedTextQuota < 0 {
		return config.Invalid("SITEOPS_NEXUS_TEXT_QUOTA, SITEOPS_NEXUS_TEXT_TOTAL and SITEOPS_NEXUS_SHARED_TEXT_QUOTA are numbers of bytes (0: no limit; for the shared one, as SITEOPS_NEXUS_TEXT_QUOTA), e.g. 67108864 (64 MiB)")
	}
	if cfg.NexusMaxRunning < 0 || cfg.NexusSharedMaxRunning < 0 {
		return config.Invalid("SITEOPS_NEXUS_MAX_RUNNING_ONBOARDINGS and SITEOPS_NEXUS_SHARED_MAX_RUNNING_ONBOARDINGS are numbers of onboardings (0: no limit; for the shared one, as SITEOPS_NEXUS_MAX_RUNNING_ONBOARDINGS), e.g. 20")
	}
	if cfg.KnowledgeRetention <= 0 {
		return config.Invalid("SITEOPS_KNOWLEDGE_RETENTION=%s must be a positive duration, e.g. 720h (30 days)", cfg.KnowledgeRetention)
	}
	// The build id is settled before anything opens: a versioned worker
	// without a real one is refused (deployment).
	dep, err := deployment(cfg.Worker, logger)
	if err != nil {
		return err
	}
	o, conn, err := settle(cfg.Database, cfg.Temporal, "worker", logger, tel, "task_queue", cfg.TaskQueue, "api", cfg.BaseURL)
	if err != nil {
		return err
	}

	checks := NewChecks(meters(tel))
	if tel != nil && cfg.MetricsAddr != "" {
		ln, err := Listen(cfg.MetricsAddr, "SITEOPS_METRICS_ADDR")
		if err != nil {
			return err
		}
		go func() {
			if err := tel.ServeMetricsAndReadiness(ctx, ln, checks.Readiness(checkTemporal, checkDatabase, checkPolling)); err != nil {
				logger.Error("metrics endpoint failed", "addr", cfg.MetricsAddr, "error", err)
			}
		}()
	}
	sdkworker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	st, storeURL, closeStore, err := openRegistered(ctx, cfg.Database, "worker", registryBuildID(dep), logger, checks)
	if err != nil {
		return err
	}
	defer closeStore()
	api, err := APIClient(cfg.AgentSite, logger)
	if err != nil {
		return err
	}
	c, err := dialPatiently(ctx, o, conn, "worker", logger, checks)
	if err != nil {
		return err
	}
	defer c.Close()
	s := starter.New(starter.Options{Client: c, Namespace: conn.Namespace})
	if err := pre.start(ctx, "worker", logger, checks,
		func(ctx context.Context) doctor.Result { return doctor.Temporal(ctx, c, conn.String(), conn.Namespace) },
		func(ctx context.Context) doctor.Result { return doctor.SearchAttributes(ctx, s) },
		func(ctx context.Context) doctor.Result { return doctor.APIKey(ctx, api) },
		func(ctx context.Context) doctor.Result { return doctor.Database(ctx, st, storeURL) },
		func(ctx context.Context) doctor.Result { return doctor.SecretKey(ctx, st) },
	); err != nil {
		return err
	}
	acts := activities.New(activities.Options{API: api, Store: st, Receivers: receivers, Classes: workflows.ClassOf})
	logger.Info("webhook endpoints may be registered and rotated under", "public_urls", receivers.String(), "loopback", receivers.AllowLoopback)
	go purgeKnowledgeTexts(ctx, st, cfg.KnowledgeRetention, logger)
	failed, started := startPatiently(cfg.TaskQueue, logger, checks)
	return worker.Run(ctx, worker.Options{
		Client: c, TaskQueue: cfg.TaskQueue, Activities: acts, Logger: logger,
		Deployment:           dep,
		SecretReconcileEvery: cfg.SecretReconcileEvery,
		LeadSweepEvery:       cfg.LeadSweepEvery,
		StartFailed:          failed, Started: started,
		Nexus: &sitenexus.Options{Texts: st, LeadSyncs: st, PayloadKey: cfg.PayloadKey, Logger: logger,
			Quota:           store.TextQuota{PerOwner: cfg.NexusTextQuota, Total: cfg.NexusTextTotal},
			SharedTextQuota: cfg.NexusSharedTextQuota, MaxRunning: cfg.NexusMaxRunning, SharedMaxRunning: cfg.NexusSharedMaxRunning},
	})
}

// purgeKnowledgeTexts deletes, once an hour, the knowledge texts that no
// onboarding referenced or read for the retention period. Every worker
// runs it; the deletes are the same whoever runs them.
func purgeKnowledgeTexts(ctx context.Context, st *store.Store, retention time.Duration, logger *slog.Logger) {
	for {
		n, err := st.PurgeKnowledgeTexts(ctx, time.Now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Warn("purging unused knowledge texts failed; next try in an hour", "error", err)
		case n > 0:
			logger.Info("purged knowledge texts no onboarding used", "texts", n, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Hour):
		}
	}
}

// IngressConfig is everything an ingress process reads from the
// environment.
type IngressConfig struct {
	config.Temporal
	config.Database
	config.Ingress
}

// RunIngress assembles an ingress process — its listeners (the webhook
// port, and the admin address for /metrics and /readyz unless it is
// empty), the store and a lazy Temporal client, so that it starts and
// accepts deliveries while Temporal is unreachable — and serves until ctx
// is done.
//
// It checks its settings first and says where its store and Temporal are
// before it listens or opens anything. Before it serves, it checks the
// database and the secret key, and refuses to start on a failure unless
// pre.Skip: a secret that does not decrypt would refuse every delivery
// signed with it. A busy address refuses at once (nothing can serve
// without it). Temporal is checked in the background and only warns: the
// ingress accepts and records deliveries while Temporal is unreachable.
func RunIngress(ctx context.Context, cfg IngressConfig, logger *slog.Logger, tel *telemetry.Telemetry, pre Preflight) error {
	if cfg.InboxRetention <= 0 {
		return config.Invalid("SITEOPS_INBOX_RETENTION=%s must be a positive duration, e.g. 720h (30 days)", cfg.InboxRetention)
	}
	if cfg.LeadShards < 0 || cfg.LeadShards > workflows.MaxLeadShards {
		return config.Invalid("SITEOPS_LEAD_SHARDS=%d must be from 0 (a lead sync per site) to %d, e.g. 16", cfg.LeadShards, workflows.MaxLeadShards)
	}
	if cfg.MaxConcurrent < 0 {
		return config.Invalid("SITEOPS_INGRESS_MAX_CONCURRENT=%d must be a positive number of deliveries, e.g. 64", cfg.MaxConcurrent)
	}
	if cfg.ShedBusyAfter < 0 {
		return config.Invalid("SITEOPS_INGRESS_SHED_BUSY_AFTER=%s must be a positive duration, e.g. 1s", cfg.ShedBusyAfter)
	}
	if cfg.MaxBody != 0 && cfg.MaxBody < 1024 {
		return config.Invalid("SITEOPS_INGRESS_MAX_BODY=%d must be a number of bytes of at least 1024, e.g. 262144 (256 KiB)", cfg.MaxBody)
	}
	if cfg.RefusedRetention <= 0 {
		return config.Invalid("SITEOPS_REFUSED_RETENTION=%s must be a positive duration, e.g. 168h (7 days)", cfg.RefusedRetention)
	}
	if cfg.RefusedMaxRows < 0 {
		return config.Invalid("SITEOPS_REFUSED_MAX_ROWS=%d must be a number of rows, e.g. 10000, or 0 to keep no record of refused deliveries", cfg.RefusedMaxRows)
	}
	o, conn, err := settle(cfg.Database, cfg.Temporal, "ingress", logger, tel, "addr", cfg.Addr, "admin_addr", cfg.AdminAddr)
	if err != nil {
		return err
	}

	ln, err := Listen(cfg.Addr, "SITEOPS_INGRESS_ADDR")
	if err != nil {
		return err
	}
	defer func() { _ = ln.Close() }()
	var admin net.Listener
	if cfg.AdminAddr != "" {
		if admin, err = Listen(cfg.AdminAddr, "SITEOPS_INGRESS_ADMIN_ADDR"); err != nil {
			return err
		}
		defer func() { _ = admin.Close() }()
	}
	checks := NewChecks(meters(tel))
	st, storeURL, closeStore, err := openRegistered(ctx, cfg.Database, "ingress", registryBuildID(nil), logger, checks)
	if err != nil {
		return err
	}
	defer closeStore()
	c, err := client.NewLazyClient(o)
	if err != nil {
		return err
	}
	defer c.Close()
	so := ingress.ServerOptions{
		Store: st, Temporal: c, TaskQueue: cfg.TaskQueue, EnvSecrets: SplitSecrets(cfg.WebhookSecrets),
		Window: cfg.ReplayWindow, MaxBody: cfg.MaxBody, MaxConcurrent: cfg.MaxConcurrent, MaxConns: cfg.MaxConnections, ShedBusyAfter: cfg.ShedBusyAfter, Logger: logger,
	}
	if tel != nil {
		so.Registry, so.MeterProvider = tel.Registry, tel.MeterProvider
	}
	so.Checks = func() (bool, any) { return checks.Degraded(), checks.Results() }
	so.Relay.Retention = cfg.InboxRetention
	so.Relay.LeadShards = cfg.LeadShards
	so.Refused = ingress.RefusedOptions{Retention: cfg.RefusedRetention, MaxRows: cfg.RefusedMaxRows, Disabled: cfg.RefusedMaxRows == 0}
	if st.Dialect() == store.Postgres {
		so.Relay.Pipelines = 2 // claims of several relays never block each other there
	}
	srv, err := ingress.New(so)
	if err != nil {
		return err
	}
	secretCheck := func(ctx context.Context) doctor.Result {
		r := doctor.SecretKey(ctx, st)
		if r.Status == doctor.Skip && len(so.EnvSecrets) > 0 {
			r.Detail = "SITEOPS_SECRET_KEY is not set: only SITEOPS_WEBHOOK_SECRETS verify, on POST /webhooks"
		}
		return r
	}
	if err := pre.start(ctx, "ingress", logger, checks,
		func(ctx context.Context) doctor.Result { return doctor.Database(ctx, st, storeURL) },
		secretCheck,
	); err != nil {
		return err
	}
	// Temporal is not needed to accept deliveries: the ingress records
	// them and its relay dispatches when Temporal answers. So it is
	// checked in the background and only degrades the process.
	go func() {
		noRefusal := Preflight{Patience: time.Nanosecond, RecheckEvery: pre.RecheckEvery}
		_ = noRefusal.start(ctx, "ingress", logger, checks, func(ctx context.Context) doctor.Result {
			r := doctor.Temporal(ctx, c, conn.String(), conn.Namespace)
			if r.Status == doctor.Fail {
				r.Transient, r.Detail = true, r.Detail+"; the ingress accepts and records deliveries meanwhile; the relay dispatches them when Temporal answers"
			}
			return r
		})
	}()
	return srv.ServeWithAdmin(ctx, ln, admin)
}

// Listen listens on addr, or says which setting names a taken or bad
// address.
func Listen(addr, setting string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, config.Invalid("%s=%s cannot be listened on (%v); free the port or choose another address", setting, addr, lastPart(err.Error()))
	}
	return ln, nil
}

// SplitSecrets reads a comma-separated list of signing secrets.
func SplitSecrets(s string) []string {
	var out []string
	for sec := range strings.SplitSeq(s, ",") {
		if sec = strings.TrimSpace(sec); sec != "" {
			out = append(out, sec)
		}
	}
	return out
}

// deployment is the Worker Deployment Version the worker polls as, or nil
// without Worker Versioning. An operator who turns it off is warned by the
// worker command, which reads that setting; a worker assembled in code
// without it (the demo's one build on its own dev server) has nothing to
// be warned about.
//
// The build id is SITEOPS_BUILD_ID, else derived from the binary
// (release.BuildID). One that names no build (dev, latest, unknown) is
// refused: builds sharing it would be one version, and a new release
// would take over the old one's pinned workflows mid-run.
func deployment(w config.Worker, logger *slog.Logger) (*worker.Deployment, error) {
	if !w.Versioning {
		return nil, nil
	}
	id, source, err := release.BuildID(w.BuildID)
	if err != nil {
		return nil, config.Invalid("%v", err)
	}
	logger.Info("worker versioning", "deployment", w.DeploymentName, "build_id", id, "build_id_from", source, "release", release.Number)
	return &worker.Deployment{Name: w.DeploymentName, BuildID: id}, nil
}

// registryBuildID is the build a process records in the store's process
// registry: a versioned worker's version; otherwise (an unversioned
// worker, an ingress) the binary's own id when it has one, from
// SITEOPS_BUILD_ID as the image sets it for every role. It only informs.
func registryBuildID(dep *worker.Deployment) string {
	if dep != nil {
		return dep.BuildID
	}
	id, _, err := release.BuildID(os.Getenv("SITEOPS_BUILD_ID"))
	if err != nil {
		return ""
	}
	return id
}

// Probe asks the worker or the ingress (role) running beside it, as a
// container health check does, whether it is healthy: the ingress's GET
// /readyz on SITEOPS_INGRESS_ADMIN_ADDR (ready: the store answers), the
// worker's GET /healthz on SITEOPS_METRICS_ADDR. It reads the variables
// the process reads, so it asks where the process listens; an address
// without a host is asked on 127.0.0.1. Anything but a 200 answer within
// ctx is the error, saying what answered; an address that cannot be asked
// is a setting to fix (config.ErrInvalid).
func Probe(ctx context.Context, role string) error {
	url, err := probeURL(role)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return config.Invalid("%v", err)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return fmt.Errorf("the %s does not answer GET %s: %w", role, url, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the %s answered GET %s with %s", role, url, resp.Status)
	}
	return nil
}

// probeURL is the health endpoint of role's process, from the variables
// that process reads.
func probeURL(role string) (string, error) {
	var addr, setting, path, example string
	switch role {
	case "ingress":
		var in config.Ingress
		if err := config.Load(&in); err != nil {
			return "", err
		}
		addr, setting, path, example = in.AdminAddr, "SITEOPS_INGRESS_ADMIN_ADDR", "/readyz", ":9091"
	case "worker":
		var w config.Worker
		if err := config.Load(&w); err != nil {
			return "", err
		}
		addr, setting, path, example = w.MetricsAddr, "SITEOPS_METRICS_ADDR", "/healthz", ":9090"
	default:
		return "", config.Invalid("siteops probe %q: probe worker or ingress", role)
	}
	if addr == "" {
		return "", config.Invalid("%s is empty, so the %s serves no %s to probe; set it, e.g. %s", setting, role, path, example)
	}
	url, err := doctor.LocalURL(addr, path)
	if err != nil {
		return "", config.Invalid("%s=%q is not HOST:PORT (%v); set it, e.g. %s", setting, addr, err, example)
	}
	return url, nil
}

// settle is how a worker and an ingress begin, before they open, listen
// on or dial anything: the store's settings checked, the Temporal client's
// options made, and one line saying where the store and Temporal are
// (with the process's own attributes after).
func settle(db config.Database, t config.Temporal, process string, logger *slog.Logger, tel *telemetry.Telemetry, attrs ...any) (client.Options, Connection, error) {
	dbURL, _, err := storeSettings(db)
	if err != nil {
		return client.Options{}, Connection{}, err
	}
	o, conn, err := TemporalOptions(t, logger, tel)
	if err != nil {
		return client.Options{}, Connection{}, err
	}
	logger.Info(process+" starting", append([]any{"store", store.Redact(dbURL), "temporal", conn.String()}, attrs...)...)
	return o, conn, nil
}

// openRegistered opens and migrates the store, patiently (openStorePatiently),
// and records the process in the store's process registry, which siteops
// release finalize reads, until the returned close, which deregisters it
// and closes the store.
func openRegistered(ctx context.Context, db config.Database, role, buildID string, logger *slog.Logger, checks *Checks) (*store.Store, string, func(), error) {
	st, storeURL, err := openStorePatiently(ctx, db, role, logger, checks)
	if err != nil {
		return nil, "", nil, err
	}
	unregister := register(ctx, st, role, buildID, logger)
	return st, storeURL, func() {
		unregister()
		_ = st.Close()
	}, nil
}
