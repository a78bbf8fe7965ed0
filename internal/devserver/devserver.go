// Package devserver starts a Temporal development server from the pinned
// `temporal` CLI (built from the Go module proxy into .tools/bin by the
// Makefile) on free local ports, for end-to-end tests and `siteops demo`.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/siteops/siteops/internal/ports"
)

// CLIVersion is the pinned CLI: later versions carry replace directives and
// cannot be built with go install.
const CLIVersion = "v1.5.1"

// CLIEnv overrides where the temporal binary is looked for.
const CLIEnv = "SITEOPS_TEMPORAL_CLI"

// SearchAttributes are registered at start, by name with the type as the
// CLI's --search-attribute names it: the ones siteops uses. The list is
// starter.SearchAttributes's (a test holds the two together); it is
// written out here so that the rigs import nothing of the product.
var SearchAttributes = map[string]string{
	"SiteopsSiteID":   "Keyword",
	"SiteopsOperator": "Keyword",
	"SiteopsCaller":   "Keyword",
}

// Dynamic is the dynamic configuration every dev server of siteops starts
// with, as `--dynamic-config-value KEY=JSON`. The cluster's
// deploy/temporal/dynamicconfig/cluster.yaml sets the same values but for
// DevOnly (deploy/temporal_test.go holds the two together).
var Dynamic = map[string]string{
	// Without this every workflow step waits about 45 ms.
	"history.transferProcessorMaxPollRPS":    "1000",
	"frontend.enableUpdateWorkflowExecution": "true",
	// Task Queue Priority: a backlogged queue dispatches by the priority
	// key the catalogue gives each kind (playbooks first), not by arrival.
	// The v1.29 server has it off by default.
	"matching.useNewMatcher": "true",
	// Task Queue Fairness: within a priority, dispatch is shared among
	// fairness keys (partners, sites). It implies the new matcher.
	"matching.enableFairness": "true",
	// One partition per task queue: each partition keeps its own order,
	// and a poller takes from one at a time, so with the default four a
	// playbook's task goes ahead of a quarter of the backlog, not all of
	// it. One process on SQLite gains nothing from more; a cluster keeps
	// its partitions for throughput (docs/operations.md).
	"matching.numTaskqueueReadPartitions":  "1",
	"matching.numTaskqueueWritePartitions": "1",
}

// DevOnly names the settings of Dynamic that only the dev server takes.
var DevOnly = []string{"matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions"}

// DynamicArgs returns Dynamic as the CLI's arguments, in a stable order.
func DynamicArgs() []string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(Dynamic)) {
		args = append(args, "--dynamic-config-value", k+"="+Dynamic[k])
	}
	return args
}

// Server is a running development server.
type Server struct {
	// Address is the frontend's HOST:PORT.
	Address string
	// HTTPAddress is the HOST:PORT of the frontend's HTTP API (Temporal's
	// HTTP API and the Nexus HTTP routes), for callers without an SDK.
	HTTPAddress string
	// UIAddress is the Web UI's URL, empty when headless.
	UIAddress  string
	cmd        *exec.Cmd
	done       chan struct{}
	namespaces []string
	// bin, args and log start the process (launch).
	bin  string
	args []string
	log  *os.File
}

// Options tune Start.
type Options struct {
	// UI turns the Web UI on.
	UI bool
	// DBFile keeps state in a file (in memory otherwise).
	DBFile string
	// Log receives the server's output (discarded when nil).
	Log *os.File
	// Namespaces are created at launch besides "default".
	Namespaces []string
	// Port is the frontend port (a free one when zero).
	Port int
	// HTTPPort is the port of the frontend's HTTP API (a free one when
	// zero): chosen here rather than by the CLI, so that Server names it.
	HTTPPort int
	// UIPort is the Web UI's port when UI is set (a free one when zero):
	// a codec server must know the UI's origin before the UI starts.
	UIPort int
	// UICodecEndpoint, when UI is set, is the codec server the Web UI's
	// page calls from the browser to decode payloads (POST
	// {UICodecEndpoint}/decode), e.g. "http://127.0.0.1:8081".
	UICodecEndpoint string
	// DynamicConfig sets dynamic configuration values, KEY to a JSON
	// value (e.g. "matching.wv.VersionDrainageStatusRefreshInterval":
	// `"1s"`), beside the ones every server here gets.
	DynamicConfig map[string]string
}

// ErrCLIMissing is returned (wrapped) by FindCLI and Start when the
// temporal CLI is not here: the tests that need a dev server then skip,
// unless SITEOPS_REQUIRE_TEMPORAL makes that a failure (e2e/testenv's
// DevServer and Shared).
var ErrCLIMissing = errors.New("temporal CLI missing")

// FindCLI locates the temporal binary: $SITEOPS_TEMPORAL_CLI, then
// .tools/bin/temporal in this module or a parent directory, then PATH.
func FindCLI() (string, error) {
	if p := os.Getenv(CLIEnv); p != "" {
		return p, nil
	}
	if dir, err := os.Getwd(); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			p := filepath.Join(d, ".tools", "bin", "temporal")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: the temporal CLI %s was not found; run `make tools` (it builds github.com/temporalio/cli/cmd/temporal@%s into .tools/bin) or set %s", ErrCLIMissing, CLIVersion, CLIVersion, CLIEnv)
}

// FreePort returns a TCP port that was free a moment ago on 127.0.0.1,
// outside the kernel's ephemeral range (see package ports, which it wraps).
func FreePort() (int, error) {
	return ports.Free()
}

// Start starts a server and waits until it serves the default namespace.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := FindCLI()
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	httpPort := opts.HTTPPort
	if httpPort == 0 {
		if httpPort, err = FreePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--http-port", strconv.Itoa(httpPort),
		"--log-level", "error",
		"--sqlite-pragma", "journal_mode=WAL", "--sqlite-pragma", "synchronous=NORMAL",
	}
	args = append(args, DynamicArgs()...)
	for k, v := range opts.DynamicConfig {
		args = append(args, "--dynamic-config-value", k+"="+v)
	}
	for _, ns := range opts.Namespaces {
		args = append(args, "--namespace", ns)
	}
	for k, v := range SearchAttributes {
		args = append(args, "--search-attribute", k+"="+v)
	}
	s := &Server{Address: fmt.Sprintf("127.0.0.1:%d", port), HTTPAddress: fmt.Sprintf("127.0.0.1:%d", httpPort), namespaces: opts.Namespaces}
	if opts.UICodecEndpoint != "" && !opts.UI {
		return nil, errors.New("devserver: UICodecEndpoint is for the Web UI; set UI too")
	}
	if opts.UI {
		uiPort := opts.UIPort
		if uiPort == 0 {
			if uiPort, err = FreePort(); err != nil {
				return nil, err
			}
		}
		args = append(args, "--ui-port", strconv.Itoa(uiPort))
		s.UIAddress = fmt.Sprintf("http://127.0.0.1:%d", uiPort)
		if opts.UICodecEndpoint != "" {
			// The UI appends "/decode" itself: a trailing slash would make
			// "//decode", which codec servers answer with a redirect or 404.
			args = append(args, "--ui-codec-endpoint", strings.TrimSuffix(opts.UICodecEndpoint, "/"))
		}
	} else {
		args = append(args, "--headless")
	}
	if opts.DBFile != "" {
		args = append(args, "--db-filename", opts.DBFile)
	}
	s.bin, s.args, s.log = bin, args, opts.Log
	if err := s.launch(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts the server's process and waits until it is ready.
func (s *Server) launch(ctx context.Context) error {
	s.done = make(chan struct{})
	s.cmd = exec.Command(s.bin, s.args...) //nolint:gosec // the pinned CLI with fixed arguments
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.log != nil {
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	done := s.done
	go func() { _ = s.cmd.Wait(); close(done) }()
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// PID is the server's process: the one whose CPU time the benchmarks
// read.
func (s *Server) PID() int { return s.cmd.Process.Pid }

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-s.done:
			return errors.New("the temporal dev server exited during start-up; run it by hand to see why")
		case <-ctx.Done():
			return fmt.Errorf("the temporal dev server did not become ready on %s: %w", s.Address, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
		ns := "default"
		if len(s.namespaces) > 0 {
			ns = s.namespaces[len(s.namespaces)-1]
		}
		c, err := client.Dial(client.Options{HostPort: s.Address, Namespace: ns, Logger: quiet{}})
		if err != nil {
			lastErr = err
			continue
		}
		_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
		if err == nil {
			_, err = c.DescribeWorkflow(ctx, "devserver-readiness-probe", "")
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				err = nil // not found means the namespace answers
			}
		}
		c.Close()
		if err == nil {
			return nil
		}
		lastErr = err
	}
}

// Stop ends the server and every process it started.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// quiet is a Temporal logger that drops everything, for readiness probes.
type quiet struct{}

func (quiet) Debug(string, ...any) {}
func (quiet) Info(string, ...any)  {}
func (quiet) Warn(string, ...any)  {}
func (quiet) Error(string, ...any) {}
