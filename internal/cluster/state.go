package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// stateFile is the name of the file in Dir that describes a cluster, so
// that another process (localcluster down) can find and stop it.
const stateFile = "cluster.json"

// ErrNoCluster is returned by Attach when Dir holds no cluster.
var ErrNoCluster = errors.New("no cluster state")

// state is what the state file records. The PostgreSQL password is left
// out: Attach takes the admin URL again.
type state struct {
	Postgres           string                   `json:"postgres"`
	Database           string                   `json:"database"`
	VisibilityDatabase string                   `json:"visibility_database"`
	Namespaces         []string                 `json:"namespaces"`
	Namespace          string                   `json:"namespace"`
	Ports              map[Service]servicePorts `json:"ports"`
	PIDs               map[Service]int          `json:"pids"`
	TLS                *TLS                     `json:"tls,omitempty"`
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
		Postgres:           redact(c.pg.admin),
		Database:           c.Database,
		VisibilityDatabase: c.VisibilityDatabase,
		Namespaces:         c.Namespaces,
		Namespace:          c.Namespace,
		Ports:              c.ports,
		PIDs:               map[Service]int{},
		TLS:                c.tls,
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
// databases; when empty the recorded one (without password) is used. log
// receives progress lines like Options.Log. It returns ErrNoCluster when
// dir holds no cluster.
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
		postgresURL = st.Postgres
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
