package e2e

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/release"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/workflows"
)

// requirePrevious makes a missing previous release a failure instead of a
// skip; make test sets it.
const requirePrevious = "SITEOPS_REQUIRE_PREVIOUS_RELEASE"

// previous is the binary of the release before this one, built once per
// test process from git (release.Previous.Commit) into the user's cache.
var previous struct {
	once sync.Once
	path string
	err  error
}

// previousBinary returns the siteops binary of release.Previous, building
// it the first time: `git archive` of its commit into
// $XDG_CACHE_HOME/siteops-e2e/src-<commit>, built with this Go into
// bin-<commit>-<go version> there, both kept for the next run. Without git
// or the commit (a tarball, a shallow clone) the test is skipped, naming
// the fix, or fails under SITEOPS_REQUIRE_PREVIOUS_RELEASE=1.
func previousBinary(t *testing.T) string {
	t.Helper()
	previous.once.Do(func() { previous.path, previous.err = buildPrevious() })
	if previous.err != nil {
		if os.Getenv(requirePrevious) != "" {
			t.Fatalf("the previous release is needed (%s is set): %v", requirePrevious, previous.err)
		}
		t.Skipf("SKIP: %v", previous.err)
	}
	return previous.path
}

func buildPrevious() (string, error) {
	commit := release.Previous.Commit
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory to build release %d in (%w); set XDG_CACHE_HOME", release.Previous.Number, err)
	}
	dir := filepath.Join(cache, "siteops-e2e")
	bin := filepath.Join(dir, "bin-"+commit[:12]+"-"+runtime.Version())
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return "", fmt.Errorf("git is not installed, so release %d (%s) cannot be built to run beside this one; install git", release.Previous.Number, commit[:12])
	}
	if out, err := exec.Command("git", "-C", "..", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return "", fmt.Errorf("this clone lacks release %d's commit %s (%w: %s); fetch it: git fetch --unshallow (or git fetch origin %s)", release.Previous.Number, commit[:12], err, strings.TrimSpace(string(out)), commit)
	}
	src := filepath.Join(dir, "src-"+commit[:12])
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		if err := extract(commit, src); err != nil {
			return "", err
		}
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	build := exec.Command("go", "build", "-o", tmp, "./cmd/siteops")
	build.Dir = src
	// Its own go.mod and go.sum, read only: the modules it needs are
	// this module's too, mostly at the same versions.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=readonly -buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building release %d from %s: %w\n%s", release.Previous.Number, src, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// extract writes the tree of commit into dir, whole or not at all.
func extract(commit, dir string) error {
	tmp := fmt.Sprintf("%s.tmp-%d", dir, os.Getpid())
	_ = os.RemoveAll(tmp)
	archive := exec.Command("git", "-C", "..", "archive", "--format=tar", commit)
	out, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	if err := archive.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = archive.Wait()
			return fmt.Errorf("reading git archive %s: %w", commit[:12], err)
		}
		path := filepath.Join(tmp, filepath.Clean("/"+h.Name)) //nolint:gosec // entries of our own repository's archive, kept under tmp
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // our own repository's files
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w", commit[:12], err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another test process extracted it first.
		_ = os.RemoveAll(tmp)
		if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
			return nil
		}
		return err
	}
	return nil
}

// releaseWorld is a Temporal dev server of its own (its drainage checks
// run every second instead of minutes apart), a simulator, a store that
// no process has opened yet, and a front door for the ingresses: the
// world the release tests upgrade, with processes of either release.
type releaseWorld struct {
	server  *devserver.Server
	sim     *simulator.Simulator
	simURL  string
	dbURL   string
	client  client.Client
	front   *frontDoor
	secret  string // SITEOPS_WEBHOOK_SECRETS: events the test posts itself
	workDir string
}

const releaseNamespace = "release"

func newReleaseWorld(t *testing.T, d store.Dialect) *releaseWorld {
	t.Helper()
	dbURL := storetest.SQLiteURL(t)
	if d == store.Postgres {
		dbURL = storetest.PostgresSchemaURL(t)
	}
	srv := testenv.DevServer(t, devserver.Options{
		Namespaces: []string{releaseNamespace},
		DynamicConfig: map[string]string{
			"matching.wv.VersionDrainageStatusVisibilityGracePeriod": `"1s"`,
			"matching.wv.VersionDrainageStatusRefreshInterval":       `"1s"`,
		},
	})
	sim, err := simulator.New(simulator.Config{
		Keys: map[string][]string{apiKey: {simulator.ScopeAll}}, TimeScale: 100,
		KnowledgeDelay: time.Hour, AllowLoopbackReceivers: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { simSrv.Close(); sim.Close() })
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: releaseNamespace,
		Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	front := newFrontDoor(t)
	return &releaseWorld{server: srv, sim: sim, simURL: simSrv.URL, dbURL: dbURL, client: c, front: front,
		secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("release-world-secret")), workDir: t.TempDir()}
}

// env is every process's environment: both releases read the same
// settings.
func (w *releaseWorld) env(extra ...string) []string {
	return append(append(os.Environ(),
		"TEMPORAL_ADDRESS="+w.server.Address, "TEMPORAL_NAMESPACE="+releaseNamespace,
		"SITEOPS_TASK_QUEUE="+taskQueue, "SITEOPS_DATABASE_URL="+w.dbURL, "SITEOPS_OPERATOR=oncall-e2e",
		"SITEOPS_ALLOW_LOOPBACK_RECEIVERS=true", "AGENTSITE_BASE_URL="+w.simURL, "AGENTSITE_API_KEY="+apiKey,
		"SITEOPS_SECRET_KEY="+testSecretKey(), "SITEOPS_METRICS_ADDR=", "SITEOPS_WEBHOOK_SECRETS="+w.secret,
		"SITEOPS_WORKER_VERSIONING=true", "SITEOPS_BUILD_ID=",
	), extra...)
}

// proc is a siteops process of either release.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *siteopstest.Log
	done chan struct{}
	addr string // an ingress's webhook address
}

// start runs bin with args until stop or the test's end.
func (w *releaseWorld) start(t *testing.T, name, bin string, args []string, extra ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: &siteopstest.Log{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = w.env(extra...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM and waits for the process to end.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 45 s of SIGTERM", p.name)
	}
}

// worker starts a versioned worker of bin as buildID and waits until it
// has said which version is current.
func (w *releaseWorld) worker(t *testing.T, bin, buildID string, extra ...string) *proc {
	t.Helper()
	p := w.start(t, "worker "+buildID, bin, []string{"worker"}, append([]string{"SITEOPS_BUILD_ID=" + buildID}, extra...)...)
	siteopstest.Eventually(t, 60*time.Second, "worker "+buildID+" to start", func() bool {
		s := p.log.String()
		select {
		case <-p.done:
			t.Fatalf("worker %s exited:\n%s", buildID, s)
		default:
		}
		return strings.Contains(s, "this build is now current") || strings.Contains(s, "is current") ||
			strings.Contains(s, "another build is the deployment's current version")
	})
	return p
}

// ingress starts an ingress of bin and waits until it is ready.
func (w *releaseWorld) ingress(t *testing.T, name, bin string) *proc {
	t.Helper()
	ps, err := ports.FreeN(2)
	if err != nil {
		t.Fatal(err)
	}
	addr, admin := "127.0.0.1:"+itoa(ps[0]), "127.0.0.1:"+itoa(ps[1])
	p := w.start(t, name, bin, []string{"ingress"}, "SITEOPS_INGRESS_ADDR="+addr, "SITEOPS_INGRESS_ADMIN_ADDR="+admin)
	p.addr = addr
	siteopstest.Eventually(t, 60*time.Second, name+" to be ready", func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited:\n%s", name, p.log.String())
		default:
		}
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// run runs a command of bin to its end and returns its output and exit
// code.
func (w *releaseWorld) run(t *testing.T, bin string, args []string, extra ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = w.env(extra...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("running %s %v: %v", bin, args, err)
	return "", -1
}

// must runs a command that must succeed.
func (w *releaseWorld) must(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, code := w.run(t, bin, args)
	if code != 0 {
		t.Fatalf("siteops %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// buildOf is the build a workflow's latest run is on.
func (w *releaseWorld) buildOf(t *testing.T, workflowID string) string {
	t.Helper()
	d, err := w.client.DescribeWorkflow(context.WithoutCancel(t.Context()), workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
}

// onboardingStatus queries an onboarding ("" step when it cannot).
func (w *releaseWorld) onboardingStatus(t *testing.T, workflowID string) workflows.OnboardingStatus {
	t.Helper()
	var st workflows.OnboardingStatus
	v, err := w.client.QueryWorkflow(t.Context(), workflowID, "", workflows.QueryStatus)
	if err == nil {
		_ = v.Get(&st)
	}
	return st
}

// spec writes an onboarding spec for slug that waits for its two
// knowledge sources, and returns its path.
func (w *releaseWorld) spec(t *testing.T, slug string, wait bool) string {
	t.Helper()
	b, err := os.ReadFile("../examples/bayside-dental.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `"slug": "bayside-dental"`, `"slug": "`+slug+`"`, 1)
	if wait {
		s = strings.Replace(s, `"faqs": [`, `"wait_for_knowledge": true, "knowledge_timeout": "10m", "faqs": [`, 1)
	}
	path := filepath.Join(w.workDir, slug+".json")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// knowledgeReady posts a signed knowledge.ready for a source of a site
// through the front door, as the service would.
func (w *releaseWorld) knowledgeReady(t *testing.T, site, knowledgeID string) {
	t.Helper()
	id := "evt_ready_" + site + "_" + knowledgeID
	if code, _ := post(t, w.front.url, w.secret, id, "knowledge.ready", `{"site_id":"`+site+`","knowledge_id":"`+knowledgeID+`"}`); code/100 != 2 {
		t.Fatalf("knowledge.ready %s of %s answered %d", knowledgeID, site, code)
	}
}

// frontDoor stands for the Service in front of the ingress replicas:
// every request goes to the next of its targets in turn, and the targets
// change as replicas are started and stopped.
type frontDoor struct {
	url      string
	targets  atomic.Pointer[[]*url.URL]
	next     atomic.Uint64
	served   sync.Map // target host → *atomic.Int64
	inflight sync.Map // target host → *atomic.Int64
}

// frontTarget carries the target a request was sent to, from the front
// door's handler to the proxy's Rewrite.
type frontTarget struct{}

func newFrontDoor(t *testing.T) *frontDoor {
	t.Helper()
	f := &frontDoor{}
	f.targets.Store(&[]*url.URL{})
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			if u, ok := r.In.Context().Value(frontTarget{}).(*url.URL); ok {
				r.SetURL(u)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, n := f.pick()
		if u == nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer n.Add(-1)
		f.count(&f.served, u.Host).Add(1)
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), frontTarget{}, u)))
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// pick chooses the next target and counts the request in flight to it,
// nil when there is none. A target that retire took out between the choice
// and the count is given up and another chosen, so that retire, once it
// has seen no request in flight to a target, sees none start.
func (f *frontDoor) pick() (*url.URL, *atomic.Int64) {
	for {
		ts := *f.targets.Load()
		if len(ts) == 0 {
			return nil, nil
		}
		u := ts[int(f.next.Add(1)%uint64(len(ts)))]
		n := f.count(&f.inflight, u.Host)
		n.Add(1)
		if slices.ContainsFunc(*f.targets.Load(), func(t *url.URL) bool { return t.Host == u.Host }) {
			return u, n
		}
		n.Add(-1)
	}
}

func (f *frontDoor) count(m *sync.Map, host string) *atomic.Int64 {
	n, _ := m.LoadOrStore(host, &atomic.Int64{})
	return n.(*atomic.Int64)
}

// route sends the front door's requests to these ingresses.
func (f *frontDoor) route(ps ...*proc) {
	ts := make([]*url.URL, len(ps))
	for i, p := range ps {
		ts[i] = &url.URL{Scheme: "http", Host: p.addr}
	}
	f.targets.Store(&ts)
}

// retire routes the front door's requests to the ingresses in ps only,
// then waits until no request is on its way to any other, as a Service
// does before the replica it dropped is stopped (deploy/kubernetes's
// preStop wait): stopped at once, a replica could close a connection a
// request was being sent on, which the front door answers 502.
func (f *frontDoor) retire(t *testing.T, ps ...*proc) {
	t.Helper()
	f.route(ps...)
	keep := map[string]bool{}
	for _, p := range ps {
		keep[p.addr] = true
	}
	siteopstest.Eventually(t, 30*time.Second, "the front door's requests to retired ingresses to end", func() bool {
		busy := false
		f.inflight.Range(func(host, n any) bool {
			busy = busy || (!keep[host.(string)] && n.(*atomic.Int64).Load() > 0)
			return !busy
		})
		return !busy
	})
}

// servedBy counts the requests an ingress got through the front door.
func (f *frontDoor) servedBy(p *proc) int64 {
	if n, ok := f.served.Load(p.addr); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}
