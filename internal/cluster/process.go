package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Service is one of the Temporal server's services, each run as its own
// process.
type Service string

// The services of a cluster.
const (
	Frontend Service = "frontend"
	History  Service = "history"
	Matching Service = "matching"
	Worker   Service = "worker"
)

// Services lists every service of a cluster.
var Services = []Service{Frontend, History, Matching, Worker}

// stopGrace is how long a service may take to stop after SIGTERM before it
// is killed.
const stopGrace = 10 * time.Second

// servicePorts are the ports one service listens on.
type servicePorts struct {
	GRPC       int `json:"grpc"`
	Membership int `json:"membership"`
	HTTP       int `json:"http,omitempty"`
}

// process is a running service.
type process struct {
	pid int
	// done is closed when the process has exited; nil when the process is
	// not a child of this one (a cluster found through Attach).
	done chan struct{}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	if p.done != nil {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
	return !alive(p.pid)
}

// wait waits up to d for the process to end and reports whether it did.
func (p *process) wait(d time.Duration) bool {
	if p.done != nil {
		select {
		case <-p.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !alive(p.pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !alive(p.pid)
}

// signal sends sig to the process group the service leads (every service
// is started as its own group).
func (p *process) signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.pid, sig); err != nil {
		_ = syscall.Kill(p.pid, sig)
	}
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	p.signal(syscall.SIGTERM)
	if !p.wait(grace) {
		p.signal(syscall.SIGKILL)
		p.wait(grace)
	}
}

// alive reports whether pid is a running temporal-server service. Checking
// the command line guards against a reused pid on Linux.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	if _, err := os.Stat("/proc/self"); err != nil {
		return true // no procfs: trust kill(0)
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	stat, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
		return false // a zombie has exited
	}
	return bytes.Contains(b, []byte("\x00--service\x00"))
}

// logFile is where a service's output goes.
func (c *Cluster) logFile(s Service) string {
	return filepath.Join(c.Dir, string(s)+".log")
}

// startService starts one service process.
func (c *Cluster) startService(s Service) error {
	f, err := os.OpenFile(c.logFile(s), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() { _ = f.Close() }()
	cmd := exec.Command(c.server, //nolint:gosec // the pinned server with arguments built here
		"--root", c.configRoot, "--config", "config", "--env", configEnv, "--allow-no-auth",
		"start", "--service", string(s))
	cmd.Dir = c.Dir
	cmd.Env = c.serviceEnv()
	cmd.Stdout, cmd.Stderr = f, f
	if c.detached {
		// A session of its own: the service outlives this process and the
		// terminal that started it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Its own process group, killed with this process.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cluster: starting %s: %w", s, err)
	}
	p := &process{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.procs[s] = p
	return nil
}

// startServices starts every service. The first process on fresh databases
// writes the cluster metadata, and several doing it at once fail ("failed to
// initialize current cluster metadata"): history goes first, the others
// once it listens.
func (c *Cluster) startServices(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.startService(History); err != nil {
		return err
	}
	if err := c.writeState(); err != nil {
		return err
	}
	if err := c.waitListening(ctx, History); err != nil {
		return err
	}
	for _, s := range Services {
		if s == History {
			continue
		}
		if err := c.startService(s); err != nil {
			return err
		}
	}
	return c.writeState()
}

// waitListening waits until service s accepts connections on its gRPC port,
// which it opens once its start-up has read and written the databases.
func (c *Cluster) waitListening(ctx context.Context, s Service) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports[s].GRPC))
	ctx, cancel := context.WithTimeout(ctx, c.startTimeout)
	defer cancel()
	for {
		if p := c.procs[s]; p.exited() {
			return c.errExited(s)
		}
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: the %s service did not listen on %s within %s (%w); see %s", s, addr, c.startTimeout, err, c.logFile(s))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serviceEnv is the environment of every service process: the caller's,
// without any TEMPORAL_* variable (the server reads TEMPORAL_ROOT and
// friends, the config TEMPORAL_SERVER_*), plus the cluster's settings.
func (c *Cluster) serviceEnv() []string {
	set := map[string]string{
		"TEMPORAL_SERVER_BIND_IP":                 "127.0.0.1",
		"TEMPORAL_SERVER_LOG_LEVEL":               c.logLevel,
		"TEMPORAL_SERVER_DYNAMIC_CONFIG_FILE":     c.dynamicConfigFile(),
		"TEMPORAL_SERVER_DB_HOST":                 c.pg.host,
		"TEMPORAL_SERVER_DB_PORT":                 strconv.Itoa(int(c.pg.port)),
		"TEMPORAL_SERVER_DB_USER":                 c.pg.user,
		"TEMPORAL_SERVER_DB_PASSWORD":             c.pg.password,
		"TEMPORAL_SERVER_DB_NAME":                 c.Database,
		"TEMPORAL_SERVER_VISIBILITY_DB_NAME":      c.VisibilityDatabase,
		"TEMPORAL_SERVER_DB_MAX_CONNS":            "10",
		"TEMPORAL_SERVER_VISIBILITY_DB_MAX_CONNS": "4",
		"TEMPORAL_SERVER_FRONTEND_HTTP_PORT":      strconv.Itoa(c.ports[Frontend].HTTP),
	}
	for _, s := range Services {
		up := strings.ToUpper(string(s))
		set["TEMPORAL_SERVER_"+up+"_GRPC_PORT"] = strconv.Itoa(c.ports[s].GRPC)
		set["TEMPORAL_SERVER_"+up+"_MEMBERSHIP_PORT"] = strconv.Itoa(c.ports[s].Membership)
	}
	if t := c.tls; t != nil {
		set["TEMPORAL_SERVER_TLS_CERT"] = t.CertFile
		set["TEMPORAL_SERVER_TLS_KEY"] = t.KeyFile
		set["TEMPORAL_SERVER_TLS_CLIENT_CA"] = t.ClientCAFile
		set["TEMPORAL_SERVER_TLS_CA"] = t.CAFile
		set["TEMPORAL_SERVER_TLS_INTERNAL_CERT"] = t.ClientCertFile
		set["TEMPORAL_SERVER_TLS_INTERNAL_KEY"] = t.ClientKeyFile
		set["TEMPORAL_SERVER_TLS_SERVER_NAME"] = t.ServerName
	}
	for k, v := range c.policy {
		set[k] = v
	}
	return mergeEnv(withoutTemporal(os.Environ()), set)
}

// withoutTemporal drops every TEMPORAL_* variable from env, and the role
// policy's SITEOPS_TEMPORAL_* (and the retired signal-only policy's): the
// cluster sets its own.
func withoutTemporal(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TEMPORAL_") && !policyVariable(kv) {
			out = append(out, kv)
		}
	}
	return out
}

// policyVariable reports whether kv sets the role policy of siteops'
// server build, or the signal-only policy it replaced.
func policyVariable(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	switch k {
	case "SITEOPS_TEMPORAL_NAMESPACE", "SITEOPS_TEMPORAL_TASK_QUEUE", "SITEOPS_TEMPORAL_RELAY_STARTS",
		"SITEOPS_TEMPORAL_RELAY_SIGNALS", "SITEOPS_TEMPORAL_ONCALL_STARTS":
		return true
	}
	return strings.HasPrefix(k, "SITEOPS_TEMPORAL_SIGNAL_")
}

// mergeEnv appends set to env in a stable order, skipping empty values.
func mergeEnv(env []string, set map[string]string) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if set[k] != "" {
			env = append(env, k+"="+set[k])
		}
	}
	return env
}

// exitedService returns the first service that has exited, if any.
func (c *Cluster) exitedService() (Service, bool) {
	for _, s := range Services {
		if p := c.procs[s]; p != nil && p.exited() {
			return s, true
		}
	}
	return "", false
}

// logTail returns the end of a service's log for error messages.
func (c *Cluster) logTail(s Service) string {
	b, err := os.ReadFile(c.logFile(s))
	if err != nil {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}

// errExited describes a service that ended during start-up.
func (c *Cluster) errExited(s Service) error {
	return fmt.Errorf("cluster: the %s service exited during start-up; its log %s ends with:\n%s", s, c.logFile(s), c.logTail(s))
}

// StopService stops one service (SIGTERM, then SIGKILL after 10 s), leaving
// the others running; StartService brings it back.
func (c *Cluster) StopService(s Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[s]
	if !ok {
		return fmt.Errorf("cluster: no %s service", s)
	}
	p.stop(stopGrace)
	return nil
}

// KillService kills one service with SIGKILL, as a crash would.
func (c *Cluster) KillService(s Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[s]
	if !ok {
		return fmt.Errorf("cluster: no %s service", s)
	}
	p.signal(syscall.SIGKILL)
	if !p.wait(stopGrace) {
		return fmt.Errorf("cluster: the %s service (pid %d) survived SIGKILL for %s", s, p.pid, stopGrace)
	}
	return nil
}

// StartService starts a service that StopService or KillService ended, on
// the same ports, and waits until the cluster serves again.
func (c *Cluster) StartService(ctx context.Context, s Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.procs[s]; ok && !p.exited() {
		return fmt.Errorf("cluster: the %s service is running (pid %d); stop it first", s, p.pid)
	}
	if err := c.startService(s); err != nil {
		return err
	}
	if err := c.writeState(); err != nil {
		return err
	}
	return c.waitReady(ctx, c.startTimeout)
}

// RestartService stops a service gracefully and starts it again.
func (c *Cluster) RestartService(ctx context.Context, s Service) error {
	if err := c.StopService(s); err != nil {
		return err
	}
	return c.StartService(ctx, s)
}

// PID returns the process id of a running service.
func (c *Cluster) PID(s Service) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[s]
	if !ok || p.exited() {
		return 0, fmt.Errorf("cluster: the %s service is not running", s)
	}
	return p.pid, nil
}
