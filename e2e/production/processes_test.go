package production

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
)

const apiKey = "svc_live_production_e2e" //nolint:gosec // the simulator's key, made up

// clusterEnv is how every siteops process of these tests reaches the
// cluster: its address and namespace, and a client certificate for mutual
// TLS (not the cluster's own).
func clusterEnv() []string {
	return append(temporal.Env(), "TEMPORAL_NAMESPACE="+namespace,
		"TEMPORAL_TLS_CLIENT_CERT_PATH="+certs.ClientCert, "TEMPORAL_TLS_CLIENT_KEY_PATH="+certs.ClientKey)
}

// proc is a siteops process the test runs, kills and restarts.
type proc struct {
	name string
	args []string
	env  []string
	log  *siteopstest.Log

	mu  sync.Mutex
	cmd *exec.Cmd
}

func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, args: args, env: env, log: &siteopstest.Log{}}
	p.start(t)
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(binary, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
}

// kill ends the process as a crash does.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		_, _ = p.cmd.Process.Wait()
		p.cmd = nil
	}
}

func (p *proc) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = p.cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		p.cmd = nil
	}
}

// siteops runs a command of the binary and returns its output and exit
// code.
func siteops(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("siteops %v: %v", args, err)
	return "", 0
}

// newSimulator serves the Agent-Site simulator on loopback for the test,
// as the end-to-end tests run it, accepting apiKey.
func newSimulator(t *testing.T, cfg simulator.Config) (*simulator.Simulator, string) {
	t.Helper()
	cfg.Keys = map[string][]string{apiKey: {simulator.ScopeAll}}
	return testenv.Simulator(t, testenv.EndToEnd(cfg))
}

// ready polls url until it answers 200.
func ready(t *testing.T, url string) {
	t.Helper()
	siteopstest.Eventually(t, 30*time.Second, url, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
