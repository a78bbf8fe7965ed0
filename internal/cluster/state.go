package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// stateFile is the name of the file in Dir that describes a cluster, so
// that another process (localcluster down) can find and stop it.
const stateFile = "cluster.json"

// ErrNoCluster is returned by Attach when Dir holds no cluster.
var ErrNoCluster = errors.New("no cluster state")

// state is what the state file records. The PostgreSQL password is never
// written (Postgres is the admin URL without it): Attach takes it from the
// caller's URL or the environment's.
type state struct {
	Postgres           string                   `json:"postgres"`
	Database           string                   `json:"database"`
	VisibilityDatabase string                   `json:"visibility_database"`
	Namespaces         []string                 `json:"namespaces"`
	Namespace          string                   `json:"namespace"`
	Ports              map[Service]servicePorts `json:"ports"`
	PIDs               map[Service]int          `json:"pids"`
	TLS                *TLS                     `json:"tls,omitempty"`
	Policy             map[string]string        `json:"policy,omitempty"`
	Given              bool                     `json:"given_databases,omitempty"`
	Server             string                   `json:"server"`
	ConfigRoot         string                   `json:"config_root"`
	LogLevel           string                   `json:"log_level"`
	Detached           bool                     `json:"detached"`
	Written            time.Time                `json:"written"`
}

func (c *Cluster) statePath() string { return filepath.Join(c.Dir, stateFile) }

// writeState records the cluster in Dir; the caller holds c.mu.
func (c *Cluster) writeState() error {
	st := state{
		Postgres:           withoutPassword(c.pg.admin),
		Database:           c.Database,
		VisibilityDatabase: c.VisibilityDatabase,
		Namespaces:         c.Namespaces,
		Namespace:          c.Namespace,
		Ports:              c.ports,
		PIDs:               map[Service]int{},
		TLS:                c.tls,
		Policy:             c.policy,
		Given:              c.given,
		Server:             c.server,
		ConfigRoot:         c.configRoot,
		LogLevel:           c.logLevel,
		Detached:           c.detached,
		Written:            time.Now().UTC(),
	}
	for s, p := range c.procs {
		st.PIDs[s] = p.pid
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	tmp := c.statePath() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return os.Rename(tmp, c.statePath())
}

// Attach finds the cluster a Start with Options.Dir dir left running (in
// another process, e.g. `make cluster`), so that it can be stopped or its
// services restarted. postgresURL is the admin connection used to drop the
// databases (and given to restarted services); when empty it is
// PostgresURL() — $SITEOPS_TEST_POSTGRES_URL, where a password lives — if
// that names the server the cluster was started on, else the recorded URL,
// which has no password (PostgreSQL's trust or peer authentication,
// PGPASSWORD or ~/.pgpass then apply). log receives progress lines like
// Options.Log. It returns ErrNoCluster when dir holds no cluster.
func Attach(dir, postgresURL string, log io.Writer) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile)) //nolint:gosec // the directory the caller names
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoCluster, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w; remove it and drop the siteops_tc_* databases by hand", filepath.Join(dir, stateFile), err)
	}
	if postgresURL == "" {
		postgresURL = attachURL(st.Postgres)
	}
	pg, err := parsePostgres(postgresURL)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Namespaces:         st.Namespaces,
		Namespace:          st.Namespace,
		Dir:                dir,
		Database:           st.Database,
		VisibilityDatabase: st.VisibilityDatabase,
		pg:                 pg,
		ports:              st.Ports,
		procs:              map[Service]*process{},
		tls:                st.TLS,
		policy:             st.Policy,
		given:              st.Given,
		server:             st.Server,
		configRoot:         st.ConfigRoot,
		logLevel:           st.LogLevel,
		detached:           st.Detached,
		startTimeout:       60 * time.Second,
		log:                slog.New(slog.DiscardHandler),
	}
	if log != nil {
		c.log = slog.New(slog.NewTextHandler(log, nil)).With("component", "cluster")
	}
	for s, pid := range st.PIDs {
		c.procs[s] = &process{pid: pid}
	}
	c.setAddresses()
	return c, nil
}

// Running returns the services whose processes are alive.
func (c *Cluster) Running() []Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Service
	for _, s := range Services {
		if p := c.procs[s]; p != nil && !p.exited() {
			out = append(out, s)
		}
	}
	return out
}

// attachURL is the admin connection Attach uses when its caller names
// none: the environment's URL (PostgresURL) when it names the recorded
// server (host and port), since only it can hold the password; otherwise
// the recorded URL, stripped of any password an older state file kept in
// redacted form ("xxxxx").
func attachURL(recorded string) string {
	env := PostgresURL()
	if recorded == "" {
		return env
	}
	r, errR := pgx.ParseConfig(recorded)
	e, errE := pgx.ParseConfig(env)
	if errR == nil && errE == nil && r.Host == e.Host && r.Port == e.Port {
		return env
	}
	return withoutPassword(recorded)
}

// withoutPassword is raw with its password removed, for the state file:
// from the user info and the query of a URL, from the password= setting of
// a key=value connection string.
func withoutPassword(raw string) string {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return dsnPassword.ReplaceAllString(raw, "")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	if q := u.Query(); q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// dsnPassword matches the password setting of a key=value connection
// string, quoted or not.
var dsnPassword = regexp.MustCompile(`(?i)\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)
