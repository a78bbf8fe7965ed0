// Package config holds siteops' settings as plain values, read from the
// environment with envconfig and validated at start; a bad value fails with a
// message that names the variable and the fix. Secrets have no defaults and
// are never printed.
//
// It deliberately does not connect to anything: package wiring turns these
// values into a store, an API client and a Temporal client. How to reach
// Temporal (address, namespace, API key, TLS, profiles) is not read here but
// by the Temporal SDK's own loader, exactly as the temporal CLI reads it;
// config only carries the command-line overrides of it.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/kelseyhightower/envconfig"
)

// Temporal is siteops' side of the Temporal connection.
type Temporal struct {
	TaskQueue string `envconfig:"SITEOPS_TASK_QUEUE" default:"siteops"`
	// PayloadKey, when set, encrypts every Temporal payload (base64 of 32
	// bytes); every siteops process talking to the namespace needs it.
	PayloadKey string `envconfig:"SITEOPS_PAYLOAD_KEY"`

	// Address, Namespace and Profile come from the --address, --namespace
	// and --profile flags and win over TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE
	// and TEMPORAL_PROFILE; empty means "as the environment says".
	Address   string `ignored:"true"`
	Namespace string `ignored:"true"`
	Profile   string `ignored:"true"`
	// Identity is the client identity Temporal records with every request
	// the process sends (a start, a signal, an update); the SDK's
	// pid@host when empty. The CLI names its operator in it.
	Identity string `ignored:"true"`
}

// AgentSite is how to reach the Agent-Site API.
type AgentSite struct {
	BaseURL string `envconfig:"AGENTSITE_BASE_URL"`
	APIKey  string `envconfig:"AGENTSITE_API_KEY"`
	// AllowLoopback lets webhook endpoints point at loopback receivers over
	// http: the simulator's test mode, for demos and tests only.
	AllowLoopback bool `envconfig:"SITEOPS_ALLOW_LOOPBACK_RECEIVERS" default:"false"`
	// RateLimit is the most requests per second one process sends with the
	// API key, from the start; it adapts below that when the API throttles.
	// Zero (unset) sends as fast as callers ask until the first 429, then
	// adapts below DefaultAPIRateLimit.
	RateLimit float64 `envconfig:"SITEOPS_API_RATE_LIMIT"`
	// Headroom is the share of the rate at which the API last answered
	// 429 that the process leaves unused, so that an on-call playbook's
	// call finds the service's budget not yet spent by bulk work.
	Headroom float64 `envconfig:"SITEOPS_API_HEADROOM" default:"0.1"`
	// PublicURL lists, comma-separated, the public URLs under which the
	// Agent-Site service reaches this deployment's ingress (for example
	// https://hooks.example.com/webhooks). A webhook endpoint that siteops
	// registers or rotates to must lie under one of them, so that nobody
	// who may start a workflow can point the account's webhooks elsewhere.
	// Unset, no endpoint can be registered or rotated (with
	// SITEOPS_ALLOW_LOOPBACK_RECEIVERS, loopback URLs still can).
	PublicURL string `envconfig:"SITEOPS_PUBLIC_URL"`
}

// DefaultAPIRateLimit is the most requests per second a process sends
// after the API first throttled it, when SITEOPS_API_RATE_LIMIT is unset.
const DefaultAPIRateLimit = 50

// Database names the store.
type Database struct {
	// URL is sqlite://PATH or postgres://...; empty means the per-user
	// SQLite file (DefaultSQLitePath), so that every command of one user
	// on one machine finds the same store wherever it is run from.
	URL string `envconfig:"SITEOPS_DATABASE_URL"`
	// SecretKey is the base64 of 32 bytes that encrypt stored signing
	// secrets.
	SecretKey string `envconfig:"SITEOPS_SECRET_KEY"`
	// MaxConns is the most PostgreSQL connections one process opens (its
	// pool); SQLite always has one. Every worker and ingress holds up to
	// this many: docs/sizing.md's connection budget adds them up against
	// the server's max_connections, and `siteops doctor` checks it.
	MaxConns int `envconfig:"SITEOPS_DATABASE_MAX_CONNS" default:"20"`
}

// The bounds of SITEOPS_DATABASE_MAX_CONNS: fewer than MinMaxConns leaves
// a process's group commit, relay and activities waiting on each other.
const (
	MinMaxConns = 4
	MaxMaxConns = 1000
)

// Ingress configures the webhook receiver.
type Ingress struct {
	// Addr serves the webhook routes (and /healthz): the public port.
	Addr string `envconfig:"SITEOPS_INGRESS_ADDR" default:":8088"`
	// AdminAddr serves /metrics, /readyz and /healthz, which only the
	// operators' network may reach (empty: none). The default listens on
	// loopback only; in a pod, set it to ":9091" so that the kubelet and
	// Prometheus reach it, and expose only Addr through the Service.
	AdminAddr string `envconfig:"SITEOPS_INGRESS_ADMIN_ADDR" default:"127.0.0.1:9091"`
	// MaxConcurrent bounds the deliveries that read their body, verify and
	// record at once; the rest wait briefly, then get 503 (the sender
	// retries).
	MaxConcurrent int `envconfig:"SITEOPS_INGRESS_MAX_CONCURRENT" default:"64"`
	// MaxConnections bounds the connections open on the webhook port; at
	// the cap the idle and slowest ones make room (docs/webhooks.md, limits).
	MaxConnections int `envconfig:"SITEOPS_INGRESS_MAX_CONNECTIONS" default:"2048"`
	// ShedBusyAfter is how long a connection must have been in its
	// request before the connection cap, finding no idle or slow
	// connection to close, closes the one busy longest to admit a new one
	// (0: the default; docs/webhooks.md, limits).
	ShedBusyAfter time.Duration `envconfig:"SITEOPS_INGRESS_SHED_BUSY_AFTER" default:"1s"`
	// MaxBody caps a delivery's body in bytes (413 above it).
	MaxBody        int64         `envconfig:"SITEOPS_INGRESS_MAX_BODY" default:"262144"`
	WebhookSecrets string        `envconfig:"SITEOPS_WEBHOOK_SECRETS"`
	ReplayWindow   time.Duration `envconfig:"SITEOPS_REPLAY_WINDOW" default:"300s"`
	// InboxRetention is how long the relay keeps handled inbox events
	// before it purges them; pending events and dead letters are kept
	// whatever their age.
	InboxRetention time.Duration `envconfig:"SITEOPS_INBOX_RETENTION" default:"720h"`
	// RefusedRetention is how long the record of refused deliveries (one
	// row per receiver, reason and minute; `siteops events list
	// --refused`) keeps a row, and RefusedMaxRows how many rows it keeps
	// at most, the oldest pruned first (made-up receiver names' before the
	// real receivers'); 0 rows keeps no record.
	RefusedRetention time.Duration `envconfig:"SITEOPS_REFUSED_RETENTION" default:"168h"`
	RefusedMaxRows   int           `envconfig:"SITEOPS_REFUSED_MAX_ROWS" default:"10000"`
	// LeadShards is how many lead event shards (LeadEvents workflows) the
	// relay sends lead.created to, many sites' events with one signal
	// that one activity syncs; 0 sends each site's events to its own
	// lead sync (LeadSync), a signal and an activity per site
	// (docs/sizing.md, capacity model).
	LeadShards int `envconfig:"SITEOPS_LEAD_SHARDS" default:"0"`
}

// Worker configures the worker process.
type Worker struct {
	// MetricsAddr serves the worker's /metrics (empty: none).
	MetricsAddr string `envconfig:"SITEOPS_METRICS_ADDR" default:"127.0.0.1:9090"`
	// Versioning opts the worker into Temporal's Worker Versioning: it
	// polls as version BuildID of deployment DeploymentName; Onboarding and
	// EndpointRegistration runs stay on the build that started them
	// (Pinned), the other kinds move to the current build (AutoUpgrade;
	// workflows.Catalogue says why).
	Versioning     bool   `envconfig:"SITEOPS_WORKER_VERSIONING" default:"true"`
	DeploymentName string `envconfig:"SITEOPS_DEPLOYMENT_NAME" default:"siteops"`
	// BuildID names this build; empty means the binary's own version.
	BuildID string `envconfig:"SITEOPS_BUILD_ID"`
	// WorkflowCacheSize is how many workflows the worker keeps in memory
	// between their tasks (the SDK's sticky cache); others replay their
	// history on their next task. See docs/sizing.md for the sizing.
	WorkflowCacheSize int `envconfig:"SITEOPS_WORKFLOW_CACHE_SIZE" default:"2000"`
	// SecretReconcileEvery is the period of the schedule that retires
	// stored webhook secrets whose endpoint is gone (secret-reconcile).
	SecretReconcileEvery time.Duration `envconfig:"SITEOPS_SECRET_RECONCILE_EVERY" default:"5m"`
	// LeadSweepEvery is the period of the schedule that checks every site
	// with a lead sync for leads whose lead.created delivery never came
	// (lead-sweep): such a lead reaches the store within about this long.
	LeadSweepEvery time.Duration `envconfig:"SITEOPS_LEAD_SWEEP_EVERY" default:"1h"`
	// NexusTextQuota bounds the bytes of knowledge texts one caller of the
	// Nexus service keeps in the store, and NexusTextTotal those of every
	// caller together, so that callers cannot fill the database the inbox
	// shares.
	NexusTextQuota int64 `envconfig:"SITEOPS_NEXUS_TEXT_QUOTA" default:"67108864"`
	NexusTextTotal int64 `envconfig:"SITEOPS_NEXUS_TEXT_TOTAL" default:"1073741824"`
	// A caller of the Nexus service is the endpoint the server names
	// (Temporal 1.30 and later). Every request without one — a Temporal
	// server before 1.30, plain HTTP to the task queue's route — counts
	// against one small shared bucket instead: NexusSharedTextQuota bytes
	// of texts (0: as NexusTextQuota) and NexusSharedMaxRunning running
	// onboardings (0: as NexusMaxRunning). NexusMaxRunning bounds each
	// identified caller's running onboardings (0: no limit).
	NexusSharedTextQuota  int64 `envconfig:"SITEOPS_NEXUS_SHARED_TEXT_QUOTA" default:"8388608"`
	NexusMaxRunning       int   `envconfig:"SITEOPS_NEXUS_MAX_RUNNING_ONBOARDINGS" default:"20"`
	NexusSharedMaxRunning int   `envconfig:"SITEOPS_NEXUS_SHARED_MAX_RUNNING_ONBOARDINGS" default:"10"`
	// KnowledgeRetention is how long a stored knowledge text that no
	// onboarding references or reads is kept before the worker purges it.
	KnowledgeRetention time.Duration `envconfig:"SITEOPS_KNOWLEDGE_RETENTION" default:"720h"`
}

// Log configures the process log.
type Log struct {
	Format string `envconfig:"SITEOPS_LOG_FORMAT" default:"text"`
	Level  string `envconfig:"SITEOPS_LOG_LEVEL" default:"info"`
}

// ErrInvalid matches, with errors.Is, every error about a setting's value:
// a process cannot start until the setting is fixed.
var ErrInvalid = errors.New("invalid setting")

// settingError is a message about a setting that matches ErrInvalid.
type settingError struct{ msg string }

func (e settingError) Error() string        { return e.msg }
func (e settingError) Is(target error) bool { return target == ErrInvalid }

// Invalid returns an error about a setting, matching ErrInvalid; the
// message names the setting and the fix.
func Invalid(format string, args ...any) error {
	return settingError{fmt.Sprintf(format, args...)}
}

// Load fills spec (a pointer to one of the structs above, or a struct that
// embeds several) from the environment.
func Load(spec any) error {
	if err := envconfig.Process("", spec); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return Invalid("%s=%q is not a valid %s; fix the variable and start again", pe.KeyName, pe.Value, pe.TypeName)
		}
		return Invalid("%s", err.Error())
	}
	return nil
}

// Validate checks siteops' Temporal settings.
func (t Temporal) Validate() error {
	if t.TaskQueue == "" {
		return Invalid("SITEOPS_TASK_QUEUE is empty; use siteops or your queue name")
	}
	return nil
}

// Validate checks the Agent-Site settings without printing the key.
func (a AgentSite) Validate() error {
	if a.BaseURL == "" {
		return Invalid("AGENTSITE_BASE_URL is not set; set it to the API's base URL, e.g. https://api.example.com (the client adds /api/v1)")
	}
	if a.APIKey == "" {
		return Invalid("AGENTSITE_API_KEY is not set; set it to a key with the scopes siteops needs (it is never logged)")
	}
	if a.RateLimit < 0 {
		return Invalid("SITEOPS_API_RATE_LIMIT=%g must be a positive number of requests per second (or unset)", a.RateLimit)
	}
	if math.IsNaN(a.Headroom) || a.Headroom < 0 || a.Headroom > 0.5 {
		return Invalid("SITEOPS_API_HEADROOM=%g must be a share from 0 to 0.5 of the API's rate, e.g. 0.1", a.Headroom)
	}
	return nil
}

// Key decodes SecretKey; nil when it is unset.
func (d Database) Key() ([]byte, error) {
	if d.SecretKey == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(d.SecretKey))
	if err != nil || len(key) != 32 {
		return nil, Invalid("SITEOPS_SECRET_KEY must be 32 random bytes in base64; make one with `openssl rand -base64 32`")
	}
	return key, nil
}

// ResolvedURL is the database URL in use: URL, or the per-user SQLite file
// when URL is empty. A relative sqlite:// path is made absolute, so that the
// store a command reports is the one it opened.
func (d Database) ResolvedURL() (string, error) {
	if d.URL == "" {
		p, err := DefaultSQLitePath()
		if err != nil {
			return "", err
		}
		return "sqlite://" + p, nil
	}
	if rest, ok := strings.CutPrefix(d.URL, "sqlite://"); ok && rest != "" && !filepath.IsAbs(rest) {
		path, query, _ := strings.Cut(rest, "?")
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", Invalid("SITEOPS_DATABASE_URL: %v", err)
		}
		if query != "" {
			abs += "?" + query
		}
		return "sqlite://" + abs, nil
	}
	return d.URL, nil
}

// DefaultSQLitePath is the store of one user on one machine when
// SITEOPS_DATABASE_URL is unset: $XDG_STATE_HOME/siteops/siteops.db, or
// ~/.local/state/siteops/siteops.db.
func DefaultSQLitePath() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", Invalid("SITEOPS_DATABASE_URL is unset and there is no home directory for the default store; set SITEOPS_DATABASE_URL")
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "siteops", "siteops.db"), nil
}

// Level parses SITEOPS_LOG_LEVEL.
func (l Log) level() (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.Level)); err != nil {
		return 0, Invalid("SITEOPS_LOG_LEVEL=%q: use debug, info, warn or error", l.Level)
	}
	return lv, nil
}

// Validate checks the log settings.
func (l Log) Validate() error {
	if l.Format != "text" && l.Format != "json" {
		return Invalid("SITEOPS_LOG_FORMAT=%q: use text or json", l.Format)
	}
	_, err := l.level()
	return err
}

// Logger returns the process logger the settings describe, writing to w.
func (l Log) Logger(w io.Writer) (*slog.Logger, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	lv, _ := l.level()
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		a.Key = SnakeCase(a.Key)
		return a
	}}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// SnakeCase writes a log key in siteops' one style: the Temporal SDK's
// WorkflowID becomes workflow_id, TaskQueue task_queue; keys already in
// snake_case are left as they are.
func SnakeCase(key string) string {
	if strings.ToLower(key) == key {
		return key
	}
	var b strings.Builder
	runes := []rune(key)
	for i, r := range runes {
		upper := unicode.IsUpper(r)
		if upper && i > 0 {
			prevLower := unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1])
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if prevLower || (nextLower && unicode.IsUpper(runes[i-1])) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
