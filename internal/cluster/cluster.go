// Package cluster runs a real, multi-process Temporal cluster on PostgreSQL
// on this machine, for tests that need more than the dev server and for
// `make cluster`. Each service (frontend, history, matching, worker) is its
// own temporal-server process, built from the Go module proxy at
// ServerVersion and configured by deploy/temporal (the same files deploy/
// uses), on ports outside the ephemeral range and on two fresh databases
// that Stop drops. Namespaces and search attributes are registered by
// deploy/temporal-setup.sh with the pinned temporal CLI.
//
// A test uses it like this (the cluster takes a few seconds to start):
//
//	c, err := cluster.Start(ctx, cluster.Options{Namespaces: []string{"siteops"}})
//	if err != nil { ... } // errors.Is ErrToolsMissing or ErrPostgresUnreachable: skip
//	defer c.Stop()
//	cl, err := c.Dial(ctx, "") // or c.ClientOptions, c.Env() for subprocesses
//	...
//	c.KillService(cluster.History) // a crash; c.StartService brings it back
//
// It deliberately leaves out the Web UI, Elasticsearch, archival, several
// hosts per service and TLS between the services (only the frontend can
// serve TLS and mutual TLS).
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/ports"
)

// configEnv is the server's --env: it loads deploy/temporal/config/cluster.yaml.
const configEnv = "cluster"

// Logs in Dir besides the services' own.
const (
	setupLog   = "setup.log"
	sqlToolLog = "sql-tool.log"
)

// DefaultNamespace is always registered.
const DefaultNamespace = "default"

// Options tune Start.
type Options struct {
	// PostgresURL is an admin connection to the PostgreSQL server the
	// cluster's databases are created on (any database; the user needs
	// CREATEDB). Default: PostgresURL().
	PostgresURL string
	// Dir receives the state file, the generated dynamic config and one log
	// per service. Default: a temporary directory that Stop removes.
	Dir string
	// Namespaces are registered besides "default", each with siteops'
	// search attributes (so is "default"). The first is Cluster.Namespace.
	Namespaces []string
	// TLS, when set, makes the frontend serve TLS (mutual TLS with
	// TLS.ClientCAFile).
	TLS *TLS
	// Databases, when set, are the databases the services use, already
	// made and their schemas set up, with the role that owns them: what
	// the runbook's steps make (deploy/postgres-roles.sh,
	// deploy/temporal-schema.sh). Start then neither creates nor sets them
	// up, the services connect as that role, and Stop leaves them.
	Databases *Databases
	// Policy, when set, is the environment of the role policy of siteops'
	// server build (deploy/temporal-server; wiring.TemporalPolicy makes
	// it): default deny, each client certificate the calls of the role
	// its OU names. It needs TLS with a ClientCAFile: without client
	// certificates no caller has a role.
	Policy map[string]string
	// Log receives progress lines of Start and Stop (discarded when nil);
	// the services write to their own logs in Dir.
	Log io.Writer
	// LogLevel is the services' log level (default "warn").
	LogLevel string
	// Detached starts the services in sessions of their own that outlive the
	// caller (`make cluster`; Attach finds them again); otherwise they die
	// with it. Either way Stop stops them and drops the databases.
	Detached bool
	// Keep leaves the databases and Dir in place at Stop.
	Keep bool
	// StartTimeout bounds each wait of Start (default 60s).
	StartTimeout time.Duration
}

// Databases are a cluster's databases on the PostgreSQL server of
// Options.PostgresURL, and the role its services connect as.
type Databases struct {
	Temporal, Visibility string
	User, Password       string
}

// TLS is the frontend's TLS configuration: paths of PEM files.
type TLS struct {
	// CertFile and KeyFile are the frontend's certificate and key.
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	// ClientCAFile, when set, turns on mutual TLS: clients must present a
	// certificate signed by it.
	ClientCAFile string `json:"client_ca_file,omitempty"`
	// CAFile signs CertFile; the cluster's own clients (the services calling
	// the frontend, the setup script, readiness probes) trust it. Default:
	// ClientCAFile.
	CAFile string `json:"ca_file,omitempty"`
	// ClientCertFile and ClientKeyFile are what the cluster's own clients
	// present under mutual TLS. Default: CertFile and KeyFile (which then
	// need the client-auth extended key usage).
	ClientCertFile string `json:"client_cert_file,omitempty"`
	ClientKeyFile  string `json:"client_key_file,omitempty"`
	// ServerName is the name clients verify in CertFile (default: the
	// address they dial, 127.0.0.1).
	ServerName string `json:"server_name,omitempty"`
}

// withDefaults returns t with the defaults documented on its fields.
func (t TLS) withDefaults() (*TLS, error) {
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("cluster: TLS needs CertFile and KeyFile")
	}
	if t.CAFile == "" {
		t.CAFile = t.ClientCAFile
	}
	if t.ClientCertFile == "" {
		t.ClientCertFile, t.ClientKeyFile = t.CertFile, t.KeyFile
	}
	for _, p := range []*string{&t.CertFile, &t.KeyFile, &t.ClientCAFile, &t.CAFile, &t.ClientCertFile, &t.ClientKeyFile} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, fmt.Errorf("cluster: TLS file %s: %w", *p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("cluster: TLS file: %w", err)
		}
		*p = abs
	}
	return &t, nil
}

// Cluster is a running cluster.
type Cluster struct {
	// Address is the frontend's gRPC HOST:PORT.
	Address string
	// HTTPAddress is the frontend's HTTP API HOST:PORT (grpc-gateway,
	// e.g. GET /api/v1/namespaces).
	HTTPAddress string
	// Namespace is the first of Options.Namespaces, else "default".
	Namespace string
	// Namespaces are every namespace registered, "default" first.
	Namespaces []string
	// Dir holds the state file, the dynamic config and the service logs.
	Dir string
	// Database and VisibilityDatabase are the cluster's databases.
	Database           string
	VisibilityDatabase string

	mu           sync.Mutex
	pg           pgServer
	ports        map[Service]servicePorts
	procs        map[Service]*process
	tls          *TLS
	policy       map[string]string
	given        bool // Options.Databases: the caller's, kept at Stop
	server       string
	configRoot   string
	setupScript  string
	logLevel     string
	detached     bool
	keep         bool
	removeDir    bool
	startTimeout time.Duration
	log          *slog.Logger
	stopped      bool
}

// Start creates the databases, sets up their schemas, starts the four
// services, waits until they serve and registers the namespaces with their
// search attributes. On error nothing is left running and the databases are
// gone (unless Keep).
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	begin := time.Now()
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	sqlTool, err := FindSQLTool()
	if err != nil {
		return nil, err
	}
	cli, err := devserver.FindCLI()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrToolsMissing, err)
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "siteops-cluster-"); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.removeDir = true
	} else if err := os.MkdirAll(c.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// The logs of an earlier cluster in Dir would only mislead.
	for _, s := range Services {
		_ = os.Remove(c.logFile(s))
	}
	_ = os.Remove(filepath.Join(c.Dir, setupLog))
	_ = os.Remove(filepath.Join(c.Dir, sqlToolLog))

	if !c.given {
		if err := c.pg.createDatabases(ctx, c.Database, c.VisibilityDatabase); err != nil {
			c.cleanupDir()
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if !c.given {
		c.log.Info("databases created", "postgres", c.pg.addr(), "temporal", c.Database, "visibility", c.VisibilityDatabase)
		if err := c.setupSchemas(ctx, sqlTool); err != nil {
			return nil, err
		}
		c.log.Info("schemas set up", "elapsed", since(begin))
	}

	if err := c.writeDynamicConfig(); err != nil {
		return nil, err
	}
	if err := c.startServices(ctx); err != nil {
		return nil, err
	}
	c.log.Info("services started", "frontend", c.Address, "http", c.HTTPAddress, "logs", c.Dir)
	if err := c.waitReady(ctx, c.startTimeout); err != nil {
		return nil, err
	}
	c.log.Info("cluster serving", "elapsed", since(begin))

	if err := c.registerNamespaces(ctx, cli); err != nil {
		return nil, err
	}
	if err := c.waitNamespaces(ctx, c.startTimeout); err != nil {
		return nil, err
	}
	c.log.Info("cluster ready", "namespaces", strings.Join(c.Namespaces, ","), "elapsed", since(begin))
	return c, nil
}

// newCluster fills a Cluster from opts, without side effects besides
// picking ports.
func newCluster(opts Options) (*Cluster, error) {
	server, err := FindServer()
	if err != nil {
		return nil, err
	}
	configRoot, setupScript, err := findDeployFiles()
	if err != nil {
		return nil, err
	}
	raw := opts.PostgresURL
	if raw == "" {
		raw = PostgresURL()
	}
	pg, err := parsePostgres(raw)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Dir:          opts.Dir,
		Namespaces:   []string{DefaultNamespace},
		Namespace:    DefaultNamespace,
		pg:           pg,
		procs:        map[Service]*process{},
		server:       server,
		configRoot:   configRoot,
		setupScript:  setupScript,
		logLevel:     opts.LogLevel,
		detached:     opts.Detached,
		keep:         opts.Keep,
		startTimeout: opts.StartTimeout,
		log:          slog.New(slog.DiscardHandler),
	}
	if opts.Log != nil {
		c.log = slog.New(slog.NewTextHandler(opts.Log, nil)).With("component", "cluster")
	}
	if c.logLevel == "" {
		c.logLevel = "warn"
	}
	if c.startTimeout <= 0 {
		c.startTimeout = 60 * time.Second
	}
	for _, ns := range opts.Namespaces {
		if ns != DefaultNamespace && !slices.Contains(c.Namespaces, ns) {
			c.Namespaces = append(c.Namespaces, ns)
		}
	}
	if len(opts.Namespaces) > 0 {
		c.Namespace = opts.Namespaces[0]
	}
	if opts.TLS != nil {
		if c.tls, err = opts.TLS.withDefaults(); err != nil {
			return nil, err
		}
	}
	c.policy = maps.Clone(opts.Policy)
	if len(opts.Policy) > 0 && (c.tls == nil || c.tls.ClientCAFile == "") {
		return nil, errors.New("cluster: Policy needs TLS with a ClientCAFile: without client certificates no caller has a role")
	}
	c.Database = newDatabaseName()
	c.VisibilityDatabase = c.Database + "_vis"
	if d := opts.Databases; d != nil {
		if d.Temporal == "" || d.Visibility == "" || d.User == "" {
			return nil, errors.New("cluster: Databases needs Temporal, Visibility and User")
		}
		c.Database, c.VisibilityDatabase = d.Temporal, d.Visibility
		c.pg.user, c.pg.password = d.User, d.Password
		c.given = true
	}
	ps, err := ports.FreeN(2*len(Services) + 1)
	if err != nil {
		return nil, err
	}
	c.ports = map[Service]servicePorts{}
	for i, s := range Services {
		c.ports[s] = servicePorts{GRPC: ps[2*i], Membership: ps[2*i+1]}
	}
	fp := c.ports[Frontend]
	fp.HTTP = ps[len(ps)-1]
	c.ports[Frontend] = fp
	c.setAddresses()
	return c, nil
}

// setAddresses derives the public addresses from the ports.
func (c *Cluster) setAddresses() {
	c.Address = "127.0.0.1:" + strconv.Itoa(c.ports[Frontend].GRPC)
	c.HTTPAddress = "127.0.0.1:" + strconv.Itoa(c.ports[Frontend].HTTP)
}

// setupSchemas sets up both schemas from the ones embedded in the SQL tool:
// versioning tables first, then every versioned step to the latest.
func (c *Cluster) setupSchemas(ctx context.Context, sqlTool string) error {
	logPath := filepath.Join(c.Dir, sqlToolLog)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // a log in the cluster's own directory
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() { _ = f.Close() }()
	for _, db := range []struct{ name, schema string }{
		{c.Database, "postgresql/v12/temporal"},
		{c.VisibilityDatabase, "postgresql/v12/visibility"},
	} {
		for _, step := range [][]string{
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "--schema-name", db.schema},
		} {
			args := append([]string{"--plugin", "postgres12", "--ep", c.pg.host, "-p", strconv.Itoa(int(c.pg.port)),
				"-u", c.pg.user, "--db", db.name}, step...)
			cmd := exec.CommandContext(ctx, sqlTool, args...) //nolint:gosec // the pinned SQL tool with arguments built here
			// The password travels in the environment, never on a command line.
			cmd.Env = mergeEnv(withoutTemporal(os.Environ()), map[string]string{"SQL_PASSWORD": c.pg.password})
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("cluster: temporal-sql-tool %s on %s failed (%w); see %s", step[0], db.name, err, logPath)
			}
		}
	}
	return nil
}

// dynamicConfigFile is the cluster's dynamic config: the kept
// deploy/temporal/dynamicconfig/cluster.yaml plus this cluster's addresses.
func (c *Cluster) dynamicConfigFile() string {
	return filepath.Join(c.Dir, "dynamicconfig.yaml")
}

func (c *Cluster) writeDynamicConfig() error {
	b, err := os.ReadFile(filepath.Join(c.configRoot, "dynamicconfig", "cluster.yaml"))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	scheme := "http"
	if c.tls != nil {
		scheme = "https"
	}
	extra := fmt.Sprintf(`
# Added by internal/cluster for this cluster's frontend HTTP address.
component.nexusoperations.callback.endpoint.template:
  - value: %s://%s/namespaces/{{.NamespaceName}}/nexus/callback
callback.allowedAddresses:
  - value:
      - Pattern: %q
        AllowInsecure: %t
`, scheme, c.HTTPAddress, c.HTTPAddress, c.tls == nil)
	if err := os.WriteFile(c.dynamicConfigFile(), append(b, extra...), 0o600); err != nil { //nolint:gosec // the cluster's own directory
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// registerNamespaces runs deploy/temporal-setup.sh with the pinned CLI.
func (c *Cluster) registerNamespaces(ctx context.Context, cli string) error {
	logPath := filepath.Join(c.Dir, setupLog)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // a log in the cluster's own directory
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(ctx, c.startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.setupScript}, c.Namespaces...)...) //nolint:gosec // the project's own script
	set := map[string]string{
		"SITEOPS_TEMPORAL_CLI": cli,
		"SITEOPS_SETUP_WAIT":   strconv.Itoa(int(c.startTimeout / time.Second)),
		// Keep the user's CLI profiles out of it.
		"TEMPORAL_CONFIG_FILE": filepath.Join(c.Dir, "no-temporal-profile.toml"),
	}
	for _, kv := range c.Env() {
		k, v, _ := strings.Cut(kv, "=")
		set[k] = v
	}
	cmd.Env = mergeEnv(withoutTemporal(os.Environ()), set)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cluster: %s failed (%w); its output is in %s", c.setupScript, err, logPath)
	}
	return nil
}

// Env returns the variables that point the temporal CLI, the SDKs and
// siteops at the cluster, as KEY=VALUE: TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE and, with TLS, the TEMPORAL_TLS_* file paths.
func (c *Cluster) Env() []string {
	env := []string{"TEMPORAL_ADDRESS=" + c.Address, "TEMPORAL_NAMESPACE=" + c.Namespace}
	if t := c.tls; t != nil {
		env = append(env, "TEMPORAL_TLS=true")
		if t.CAFile != "" {
			env = append(env, "TEMPORAL_TLS_SERVER_CA_CERT_PATH="+t.CAFile)
		}
		if t.ClientCAFile != "" {
			env = append(env, "TEMPORAL_TLS_CLIENT_CERT_PATH="+t.ClientCertFile, "TEMPORAL_TLS_CLIENT_KEY_PATH="+t.ClientKeyFile)
		}
		if t.ServerName != "" {
			env = append(env, "TEMPORAL_TLS_SERVER_NAME="+t.ServerName)
		}
	}
	return env
}

// ClientOptions returns SDK client options for namespace (Cluster.Namespace
// when empty), with the TLS configuration of the cluster's own clients when
// the frontend serves TLS.
func (c *Cluster) ClientOptions(namespace string) (client.Options, error) {
	if namespace == "" {
		namespace = c.Namespace
	}
	return c.clientOptions(namespace)
}

func (c *Cluster) clientOptions(namespace string) (client.Options, error) {
	opts := client.Options{HostPort: c.Address, Namespace: namespace}
	if c.tls == nil {
		return opts, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.tls.ServerName}
	if c.tls.CAFile != "" {
		pem, err := os.ReadFile(c.tls.CAFile)
		if err != nil {
			return opts, fmt.Errorf("cluster: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("cluster: %s holds no PEM certificate", c.tls.CAFile)
		}
	}
	if c.tls.ClientCAFile != "" {
		cert, err := tls.LoadX509KeyPair(c.tls.ClientCertFile, c.tls.ClientKeyFile)
		if err != nil {
			return opts, fmt.Errorf("cluster: loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	opts.ConnectionOptions.TLS = cfg
	return opts, nil
}

// Dial returns an SDK client of namespace (Cluster.Namespace when empty).
func (c *Cluster) Dial(ctx context.Context, namespace string) (client.Client, error) {
	opts, err := c.ClientOptions(namespace)
	if err != nil {
		return nil, err
	}
	return client.DialContext(ctx, opts)
}

// Policy returns the environment of the role policy the cluster's
// services run with (Options.Policy).
func (c *Cluster) Policy() map[string]string { return maps.Clone(c.policy) }

// Server returns the path of the server binary the cluster runs.
func (c *Cluster) Server() string { return c.server }

// LogFile returns the path of a service's log.
func (c *Cluster) LogFile(s Service) string { return c.logFile(s) }

// SiteopsDatabase is the name of the database for siteops' own store
// beside the cluster's (CreateSiteopsDatabase): Database with "_siteops".
// Stop drops it with the cluster's when it exists.
func (c *Cluster) SiteopsDatabase() string { return c.Database + "_siteops" }

// CreateSiteopsDatabase creates SiteopsDatabase on the cluster's server
// unless it exists, and returns the SITEOPS_DATABASE_URL that names it:
// the cluster's user, host and port, without the password (the caller
// adds it where the server asks for one).
func (c *Cluster) CreateSiteopsDatabase(ctx context.Context) (string, error) {
	conn, err := c.pg.connect(ctx)
	if err != nil {
		return "", err
	}
	var exists bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, c.SiteopsDatabase()).Scan(&exists)
	_ = conn.Close(context.Background())
	if err != nil {
		return "", fmt.Errorf("cluster: looking for database %s: %w", c.SiteopsDatabase(), err)
	}
	if !exists {
		if err := c.pg.createDatabases(ctx, c.SiteopsDatabase()); err != nil {
			return "", err
		}
	}
	u := url.URL{Scheme: "postgres", User: url.User(c.pg.user), Host: c.pg.addr(), Path: "/" + c.SiteopsDatabase(), RawQuery: "sslmode=disable"}
	return u.String(), nil
}

// Stop stops every service (SIGTERM, then SIGKILL after 10 s) and, unless
// Options.Keep, drops the databases and removes a temporary Dir. It is safe
// to call more than once.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	begin := time.Now()
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(stopGrace) }()
	}
	wg.Wait()
	c.log.Info("services stopped", "elapsed", since(begin))
	if c.keep {
		return nil
	}
	if c.given {
		_ = os.Remove(c.statePath())
		c.cleanupDir()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.pg.dropDatabases(ctx, c.Database, c.VisibilityDatabase, c.SiteopsDatabase())
	if err == nil {
		c.log.Info("databases dropped", "temporal", c.Database, "visibility", c.VisibilityDatabase)
		_ = os.Remove(c.statePath())
	}
	c.cleanupDir()
	return err
}

// cleanupDir removes Dir when Start created it.
func (c *Cluster) cleanupDir() {
	if c.removeDir && !c.keep {
		_ = os.RemoveAll(c.Dir)
	}
}

func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }
