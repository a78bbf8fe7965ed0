package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
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
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/siteops/siteops/codec"
	"github.com/siteops/siteops/config"
	"github.com/siteops/siteops/e2e/testenv"
	"github.com/siteops/siteops/internal/devserver"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/starter"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/wiring"
	"github.com/siteops/siteops/workflows"
)

// ChromiumEnv names a Chromium or Chrome binary for the Web UI test, ahead
// of the usual places.
const ChromiumEnv = "SITEOPS_CHROMIUM"

// RequireBrowserEnv, set to 1, makes the tests that drive a browser fail
// instead of skipping when none is found: CI sets it (.ci/run installs
// Debian's chromium), so that the Web UI test always runs there.
const RequireBrowserEnv = "SITEOPS_REQUIRE_BROWSER"

// ScreenshotEnv, set to 1, makes the Web UI test write the README's
// screenshot, docs/webui-decoded.png; normal runs leave it alone.
const ScreenshotEnv = "SITEOPS_UPDATE_SCREENSHOT"

// TestWebUIShowsDecodedPayloads onboards a site with SITEOPS_PAYLOAD_KEY
// set, on a dev server whose Web UI is pointed at siteops' codec server,
// opens the workflow's page in headless Chromium and checks that the input
// is shown decoded — the browser itself calls the codec server, so this is
// what proves its CORS, path and headers right — and that the codec server
// refuses a page of another origin, both from that browser and to a plain
// request carrying a foreign Origin.
func TestWebUIShowsDecodedPayloads(t *testing.T) {
	browser := findChromium(t)
	began := time.Now()
	lap := func(what string) { t.Logf("%6.1fs  %s", time.Since(began).Seconds(), what) }

	// The codec server must know the UI's origin, and the UI the codec
	// server's address, before either starts.
	rawKey := make([]byte, 32)
	if _, err := rand.Read(rawKey); err != nil {
		t.Fatal(err)
	}
	cd, err := codec.New(codec.Options{Keys: [][]byte{rawKey}})
	if err != nil {
		t.Fatal(err)
	}
	uiPort, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	uiOrigin := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	seen := &codecLog{}
	// As the demo does: no token (the dev server's UI passes none on), the
	// codec server's own loopback Host names and the UI's origin.
	codecSrv := httptest.NewUnstartedServer(nil)
	h, err := codec.NewHandler(codec.HandlerOptions{Codec: cd, Hosts: codec.LocalHosts(codecSrv.Listener.Addr().String()), Origins: []string{uiOrigin}})
	if err != nil {
		t.Fatal(err)
	}
	codecSrv.Config = codec.NewServer(seen.wrap(h))
	codecSrv.Start()
	t.Cleanup(codecSrv.Close)

	logFile, err := os.Create(filepath.Join(t.TempDir(), "temporal.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	ds := testenv.DevServer(t, devserver.Options{UI: true, UIPort: uiPort, UICodecEndpoint: codecSrv.URL, Log: logFile})
	if ds.UIAddress != uiOrigin {
		t.Fatalf("the Web UI is on %s, want %s", ds.UIAddress, uiOrigin)
	}
	lap("dev server with the Web UI and the codec endpoint up")

	wf := onboardEncrypted(t, ds.Address, base64.StdEncoding.EncodeToString(rawKey))
	lap("onboarding " + wf.id + " published, its payloads encrypted")

	waitForHTTP(t, 30*time.Second, ds.UIAddress)
	lap("Web UI answers")

	ctx := newBrowser(t, browser, 3*time.Minute)
	if err := showsDecodedInput(ctx, ds.UIAddress, wf); err != nil {
		t.Fatalf("%v; the codec server saw %d requests: %v", err, len(seen.all()), firstFew(seen.all(), 6))
	}
	lap("the Web UI shows the input decoded")
	if os.Getenv(ScreenshotEnv) == "1" {
		writeScreenshot(ctx, t, "../docs/webui-decoded.png")
		lap("screenshot written to docs/webui-decoded.png")
	}

	// What the Web UI sent: a preflight, then POST /decode, from its own
	// origin, with the namespace in X-Namespace.
	var preflight, decode *codecRequest
	for _, r := range seen.all() {
		if r.origin != uiOrigin || r.path != "/decode" {
			continue
		}
		switch {
		case r.method == http.MethodOptions && preflight == nil:
			preflight = &r
		case r.method == http.MethodPost && decode == nil:
			decode = &r
		}
	}
	if preflight == nil || preflight.status != http.StatusNoContent || !strings.Contains(preflight.requestHeaders, "x-namespace") {
		t.Errorf("preflight from the Web UI = %+v, want OPTIONS /decode asking for x-namespace, answered 204", preflight)
	}
	if decode == nil || decode.status != http.StatusOK || decode.namespace != "default" {
		t.Errorf("decode from the Web UI = %+v, want POST /decode with X-Namespace default, answered 200", decode)
	}
	for _, r := range seen.all() {
		if r.allowCredentials != "" {
			t.Errorf("the codec server answered %s %s from %s allowing credentials (%q)", r.method, r.path, r.origin, r.allowCredentials)
		}
	}
	t.Logf("the Web UI called the codec server with: preflight %+v; decode %+v", preflight, decode)

	// A page of another origin, in the same browser, may not use the codec
	// server: its preflight is refused, so the POST is never sent.
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<!doctype html><title>another site</title><p>another site")
	}))
	t.Cleanup(foreign.Close)
	fetchJS := fmt.Sprintf(`fetch(%q, {method: "POST", headers: {"Content-Type": "application/json", "X-Namespace": "default"}, body: '{"payloads":[]}'})
		.then(r => "answered " + r.status, e => "refused: " + e)`, codecSrv.URL+"/decode")
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(runCtx, chromedp.Navigate(foreign.URL)); err != nil {
		t.Fatalf("opening %s: %v", foreign.URL, err)
	}
	outcome, err := chromedp.Run(runCtx, chromedp.Evaluate[string](fetchJS, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the cross-origin fetch: %v", err)
	}
	if !strings.HasPrefix(outcome, "refused") {
		t.Errorf("a page on %s fetched the codec server: %s", foreign.URL, outcome)
	}
	for _, r := range seen.all() {
		if r.origin == foreign.URL && (r.method != http.MethodOptions || r.status != http.StatusForbidden) {
			t.Errorf("the codec server answered %s %s from %s with %d; want only a preflight refused with 403", r.method, r.path, r.origin, r.status)
		}
	}
	if !seen.has(foreign.URL, http.MethodOptions, http.StatusForbidden) {
		t.Errorf("the codec server saw no refused preflight from %s: %v", foreign.URL, seen.all())
	}
	lap("a page of another origin was refused: " + outcome)

	// DNS rebinding: a page of evil.example whose name then resolves to
	// the codec server's address calls /decode on its own origin — no
	// preflight, since for the browser it is the same origin. The browser
	// maps evil.example to 127.0.0.1 (newBrowser); the rebound server
	// serves the page, then passes every other request on to the codec
	// server as the rebound name would reach it, Host and all.
	codecURL, _ := url.Parse(codecSrv.URL)
	rebound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			_, _ = io.WriteString(w, "<!doctype html><title>rebound</title><p>rebound")
			return
		}
		httputil.NewSingleHostReverseProxy(codecURL).ServeHTTP(w, r)
	}))
	t.Cleanup(rebound.Close)
	reboundPage := "http://" + reboundHost + ":" + rebound.URL[strings.LastIndex(rebound.URL, ":")+1:] + "/"
	if err := chromedp.Do(runCtx, chromedp.Navigate(reboundPage)); err != nil {
		t.Fatalf("opening %s: %v", reboundPage, err)
	}
	rebindJS := `fetch("/decode", {method: "POST", headers: {"Content-Type": "application/json", "X-Namespace": "default"}, body: '{"payloads":[]}'})
		.then(async r => "answered " + r.status + ": " + (await r.text()).trim(), e => "refused: " + e)`
	outcome, err = chromedp.Run(runCtx, chromedp.Evaluate[string](rebindJS, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the rebound fetch: %v", err)
	}
	// Its Origin is foreign too, but the Host check must be what refuses
	// it: the Origin check alone lets through a request without one.
	if !strings.HasPrefix(outcome, "answered 403") || !strings.Contains(outcome, "Host") {
		t.Errorf("a DNS-rebinding page on %s fetched /decode: %s, want answered 403 by the Host check", reboundPage, outcome)
	}
	for _, r := range seen.all() {
		if strings.HasPrefix(r.host, reboundHost) && r.status != http.StatusForbidden {
			t.Errorf("the codec server answered %s %s for Host %s with %d, want 403", r.method, r.path, r.host, r.status)
		}
	}
	lap("a DNS-rebinding page was refused: " + outcome)

	// The same refusals without a browser: a foreign Origin, a foreign
	// Host even with the UI's origin, and a simple text/plain POST get no
	// payloads, and no answer allows credentials.
	port := codecURL.Port()
	for _, tt := range []struct {
		name, host, origin, contentType string
		want                            int
	}{
		{"from another origin", "", "http://attacker.example", "application/json", http.StatusForbidden},
		{"for a rebound Host, with the UI's origin", "evil.example:" + port, uiOrigin, "application/json", http.StatusForbidden},
		{"as text/plain, from the UI's origin", "", uiOrigin, "text/plain", http.StatusUnsupportedMediaType},
		{"from the UI", "", uiOrigin, "application/json", http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(ctxWithin(t, 10*time.Second), http.MethodPost, codecSrv.URL+"/decode", strings.NewReader(`{"payloads":[]}`))
		if tt.host != "" {
			req.Host = tt.host
		}
		req.Header.Set("Origin", tt.origin)
		req.Header.Set("Content-Type", tt.contentType)
		req.Header.Set("X-Namespace", "default") // as the Web UI and the CLI send it; required
		resp, err := codecSrv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		wantAllow := ""
		if tt.host == "" && tt.origin == uiOrigin {
			wantAllow = uiOrigin
		}
		if resp.StatusCode != tt.want || resp.Header.Get("Access-Control-Allow-Origin") != wantAllow || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("POST /decode %s = %d with Access-Control-Allow-Origin %q and -Credentials %q, want %d, %q and none",
				tt.name, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Allow-Credentials"), tt.want, wantAllow)
		}
	}
}

// reboundHost is the name newBrowser resolves to 127.0.0.1, standing for a
// DNS-rebinding attacker's domain.
const reboundHost = "rebound.example"

// TestDemoWithPayloadKeyServesTheCodec runs `siteops demo --keep` with
// SITEOPS_PAYLOAD_KEY set, as `make demo` does with the key exported: the
// histories hold ciphertext, the demo's Web UI is configured with the
// demo's codec server, which answers the UI's origin and refuses others,
// and, when Chromium is installed, the UI shows an onboarding's input
// decoded.
func TestDemoWithPayloadKeyServesTheCodec(t *testing.T) {
	rawKey := make([]byte, 32)
	if _, err := rand.Read(rawKey); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	dir := t.TempDir()
	cmd := exec.Command(binary, "demo", "--keep", "--leads", "10", "--dir", dir)
	cmd.Env = append(os.Environ(), "SITEOPS_PAYLOAD_KEY="+base64.StdEncoding.EncodeToString(rawKey))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	stopped := false // the demo ended by itself, and the test said so
	t.Cleanup(func() {
		if stopped {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the demo exited with %v after Ctrl-C", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("the demo did not stop within 30s of Ctrl-C")
		}
	})
	var mu sync.Mutex
	var out strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), "everything keeps running") {
				close(ready)
				signalled = true
			}
		}
		exited <- cmd.Wait()
	}()
	output := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	select {
	case <-ready:
	case err := <-exited:
		stopped = true
		t.Fatalf("the demo exited (%v):\n%s", err, output())
	case <-time.After(2 * time.Minute):
		t.Fatalf("the demo did not come up within 2 minutes:\n%s", output())
	}
	m := regexp.MustCompile(`frontend (\S+), Web UI (http://\S+)\n\s+codec server (http://\S+):`).FindStringSubmatch(output())
	if m == nil {
		t.Fatalf("the demo printed no codec server next to the Web UI:\n%s", output())
	}
	frontend, uiAddr, codecURL := m[1], m[2], m[3]
	t.Logf("%5.1fs  the demo is up: Web UI %s, codec server %s", time.Since(began).Seconds(), uiAddr, codecURL)

	// The Web UI is configured with the demo's codec server.
	var settings struct{ Codec struct{ Endpoint string } }
	getJSON(t, uiAddr+"/api/v1/settings", &settings)
	if settings.Codec.Endpoint != codecURL {
		t.Errorf("the Web UI's codec endpoint = %q, want the demo's codec server %s", settings.Codec.Endpoint, codecURL)
	}
	// The codec server answers the UI's origin, by address and as localhost, and no other.
	uiPort := uiAddr[strings.LastIndex(uiAddr, ":")+1:]
	for origin, want := range map[string]int{
		uiAddr:                       http.StatusNoContent,
		"http://localhost:" + uiPort: http.StatusNoContent,
		"http://localhost:1":         http.StatusForbidden,
		"https://attacker.example":   http.StatusForbidden,
	} {
		req, _ := http.NewRequestWithContext(ctxWithin(t, 10*time.Second), http.MethodOptions, codecURL+"/decode", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight from %s = %d, Access-Control-Allow-Credentials %q; want %d and none", origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Credentials"), want)
		}
	}
	// A rebound Host is refused even with the UI's origin.
	req, _ := http.NewRequestWithContext(ctxWithin(t, 10*time.Second), http.MethodOptions, codecURL+"/decode", nil)
	req.Host = "evil.example" + codecURL[strings.LastIndex(codecURL, ":"):]
	req.Header.Set("Origin", uiAddr)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("preflight for Host %s = %d, want 403", req.Host, resp.StatusCode)
	}

	// The histories hold ciphertext: a client without the key sees none
	// of the site's text.
	c, err := client.Dial(client.Options{HostPort: frontend, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const wfID = "onboarding/bayside-dental"
	desc, err := c.DescribeWorkflow(ctxWithin(t, 10*time.Second), wfID, "")
	if err != nil {
		t.Fatalf("the demo's %s: %v", wfID, err)
	}
	it := c.GetWorkflowHistory(ctxWithin(t, 20*time.Second), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var raw strings.Builder
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		raw.WriteString(ev.String())
	}
	if strings.Contains(raw.String(), "Bayside Dental") || !strings.Contains(raw.String(), codec.Encoding) {
		t.Errorf("the demo's history of %s is not encrypted", wfID)
	}

	if browser, ok := chromium(); ok {
		ctx := newBrowser(t, browser, 2*time.Minute)
		if err := showsDecodedInput(ctx, uiAddr, workflowRun{id: wfID, runID: desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%5.1fs  the demo's Web UI shows %s decoded", time.Since(began).Seconds(), wfID)
	} else {
		noBrowser(t, "the demo's Web UI was checked over HTTP only")
	}
}

// workflowRun names one workflow execution.
type workflowRun struct{ id, runID string }

// onboardEncrypted runs the bayside-dental onboarding on the dev server at
// address with payloadKey set for the worker and the starter, as a siteops
// deployment with SITEOPS_PAYLOAD_KEY would.
func onboardEncrypted(t *testing.T, address, payloadKey string) workflowRun {
	t.Helper()
	e := newEnvAt(t, address, "default", store.SQLite, simulator.Config{})
	e.StartWorker(t, testenv.WorkerOptions{PayloadKey: payloadKey})
	tc := config.Temporal{Address: address, Namespace: "default", TaskQueue: taskQueue, PayloadKey: payloadKey}
	c, _, err := wiring.DialTemporal(t.Context(), tc, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := starter.New(starter.Options{Client: c, Texts: e.Store, TaskQueue: taskQueue})
	o, err := s.Onboard(t.Context(), prepare(t, "../examples/bayside-dental.json", "bayside-dental"))
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.OnboardingResult
	if err := o.Run.Get(ctxWithin(t, time.Minute), &res); err != nil || res.Status != "published" {
		t.Fatalf("%s: result %+v, %v", o.WorkflowID, res, err)
	}
	return workflowRun{id: o.WorkflowID, runID: o.Run.GetRunID()}
}

// findChromium returns the browser to drive, or skips the test naming the
// package to install (fails it, with SITEOPS_REQUIRE_BROWSER=1).
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(ChromiumEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", ChromiumEnv, p, err)
		}
		return p
	}
	p, ok := chromium()
	if !ok {
		noBrowser(t, "") // ends the test
	}
	return p
}

// noBrowser says that no browser was found, naming the package to install:
// a failure when RequireBrowserEnv is 1, else a skip (saying, when instead
// is given, what the test checked before it: call it last).
func noBrowser(t *testing.T, instead string) {
	t.Helper()
	const msg = "no Chromium or Chrome found for the Web UI test; install Debian's chromium package (apt-get install chromium; .ci/run does) or set " + ChromiumEnv
	switch {
	case os.Getenv(RequireBrowserEnv) == "1":
		t.Fatalf("%s (%s=1 requires a browser)", msg, RequireBrowserEnv)
	case instead != "":
		t.Skipf("SKIP: %s: %s", msg, instead)
	default:
		t.Skipf("SKIP: %s", msg)
	}
}

// chromium looks for a browser: $SITEOPS_CHROMIUM, then Debian's
// chromium, then the other usual names on PATH.
func chromium() (string, bool) {
	if p := os.Getenv(ChromiumEnv); p != "" {
		return p, true
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// showsDecodedInput opens the history page of wf in the Web UI at uiAddr
// and waits, at most a minute, until it shows the bayside-dental input
// decoded: the site's title and headline are only inside the encrypted
// input, so seeing them means the page decoded it through the codec
// server; the ciphertext's encoding must not show.
func showsDecodedInput(ctx context.Context, uiAddr string, wf workflowRun) error {
	page := fmt.Sprintf("%s/namespaces/default/workflows/%s/%s/history", uiAddr, url.PathEscape(wf.id), url.PathEscape(wf.runID))
	navCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(navCtx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(page)); err != nil {
		return fmt.Errorf("opening %s: %w", page, err)
	}
	const decoded = `(() => { const s = document.body ? document.body.innerText : "";
		return s.includes("Bayside Dental") && s.includes("Gentle dentistry by the bay"); })()`
	if err := pollJS(ctx, decoded, time.Minute); err != nil {
		return fmt.Errorf("%s did not show the decoded input within a minute (%w); page text:\n%s", page, err, truncate(pageText(ctx), 2000))
	}
	text := pageText(ctx)
	for _, cipher := range []string{codec.Encoding, base64.StdEncoding.EncodeToString([]byte(codec.Encoding))} {
		if strings.Contains(text, cipher) {
			return fmt.Errorf("%s shows the input decoded but still shows ciphertext (%q)", page, cipher)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func firstFew[T any](xs []T, n int) []T {
	return xs[:min(n, len(xs))]
}

// getJSON decodes the JSON answer of a GET, bounded to ten seconds.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxWithin(t, 10*time.Second), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// newBrowser starts headless Chromium with a fresh profile, no network of
// its own (no updates, sync or QUIC), for at most within.
func newBrowser(t *testing.T, bin string, within time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("host-resolver-rules", "MAP "+reboundHost+" 127.0.0.1"),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), within)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(string, ...any) {}))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancelTimeout() })
	// The first action starts the browser, which lives as long as the
	// context of that action: bctx, bounded by within.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	return bctx
}

// pollJS waits until the expression is true in the page, for at most within.
func pollJS(ctx context.Context, expr string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(within)))
	return err
}

// pageText is the page's visible text, for failure messages.
func pageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

func writeScreenshot(ctx context.Context, t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil { // a committed picture, read by all
		t.Fatal(err)
	}
}

// waitForHTTP polls url until it answers 200, for at most within, and
// fails with the last error or status it got instead.
func waitForHTTP(t *testing.T, within time.Duration, url string) {
	t.Helper()
	siteopstest.EventuallyNil(t, within, url+" to answer 200", func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("it answered %s", resp.Status)
		}
		return nil
	})
}

// codecRequest is what the codec server was asked and answered.
type codecRequest struct {
	method, path, origin, host string
	// allowCredentials is the answer's Access-Control-Allow-Credentials.
	allowCredentials string
	// requestHeaders is a preflight's Access-Control-Request-Headers.
	requestHeaders string
	namespace      string
	status         int
}

// codecLog records every request to the codec server.
type codecLog struct {
	mu   sync.Mutex
	reqs []codecRequest
}

func (l *codecLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.reqs = append(l.reqs, codecRequest{method: r.Method, path: r.URL.Path, origin: r.Header.Get("Origin"), host: r.Host,
			allowCredentials: w.Header().Get("Access-Control-Allow-Credentials"),
			requestHeaders:   strings.ToLower(r.Header.Get("Access-Control-Request-Headers")), namespace: r.Header.Get("X-Namespace"), status: sw.status})
	})
}

func (l *codecLog) all() []codecRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]codecRequest(nil), l.reqs...)
}

func (l *codecLog) has(origin, method string, status int) bool {
	for _, r := range l.all() {
		if r.origin == origin && r.method == method && r.status == status {
			return true
		}
	}
	return false
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// codecCommand is a `siteops codec-server` process.
type codecCommand struct {
	url    string
	stdout string // its first line
	stderr *siteopstest.Log
	cmd    *exec.Cmd
	exited chan error
}

// startCodecCommand runs `siteops codec-server` on a free port with
// SITEOPS_PAYLOAD_KEY and env, as users do, and waits for its first line.
func startCodecCommand(t *testing.T, env []string, args ...string) *codecCommand {
	t.Helper()
	port, err := devserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"codec-server", "--addr", fmt.Sprintf("127.0.0.1:%d", port)}, args...)...)
	cmd.Env = append(append(os.Environ(), "SITEOPS_PAYLOAD_KEY="+base64.StdEncoding.EncodeToString([]byte("payload-key-for-e2e-0123456789ab"))), env...)
	c := &codecCommand{url: fmt.Sprintf("http://127.0.0.1:%d", port), stderr: &siteopstest.Log{}, cmd: cmd, exited: make(chan error, 1)}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, stdout)
		c.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case c.stdout = <-first:
	case <-time.After(30 * time.Second):
		t.Fatalf("codec-server printed nothing within 30s; stderr: %s", c.stderr.String())
	}
	if !strings.Contains(c.stdout, "on "+c.url) {
		t.Fatalf("codec-server printed %q, want its address %s; stderr: %s", c.stdout, c.url, c.stderr.String())
	}
	return c
}

// stop sends Ctrl-C and waits for the process to end cleanly.
func (c *codecCommand) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.exited:
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 130) {
			t.Errorf("codec-server exited with %v after Ctrl-C, want 0 or 130", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("codec-server did not stop within 15s of Ctrl-C")
	}
}

// codecCall is one plain HTTP request to a codec server and the status
// it must get.
type codecCall struct {
	name, method, origin, host, contentType, auth string
	body                                          io.Reader
	want                                          int
}

// checkCodecCalls sends each call to url's /decode and checks its status, that no
// answer allows credentials, and that a refusal carries no payloads.
func checkCodecCalls(t *testing.T, url string, calls []codecCall) {
	t.Helper()
	for _, tt := range calls {
		body := tt.body
		if body == nil {
			body = strings.NewReader(`{"payloads":[]}`)
		}
		req, _ := http.NewRequestWithContext(ctxWithin(t, 20*time.Second), tt.method, url+"/decode", body)
		if tt.host != "" {
			req.Host = tt.host
		}
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		if tt.contentType == "" {
			tt.contentType = "application/json"
		}
		req.Header.Set("Content-Type", tt.contentType)
		req.Header.Set("X-Namespace", "default") // as the Web UI and the CLI send it; required
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s: %s /decode = %d, want %d (%s)", tt.name, tt.method, resp.StatusCode, tt.want, b)
		}
		if got := resp.Header.Get("Access-Control-Allow-Credentials"); got != "" {
			t.Errorf("%s: Access-Control-Allow-Credentials = %q, want none", tt.name, got)
		}
		if resp.StatusCode >= 400 && strings.Contains(string(b), "metadata") {
			t.Errorf("%s: a refusal carried payloads: %s", tt.name, b)
		}
	}
}

// TestCodecServerCommandAnswersOnlyItsOrigins runs `siteops codec-server`
// as users do, without a token: it answers the Web UI origin it was given
// and the CLI (no Origin) on its own Host names; it refuses, and logs,
// other origins, a rebound Host even with the UI's origin, a body that is
// not JSON and one over 8 MiB; no answer allows credentials; and it stops
// on Ctrl-C.
func TestCodecServerCommandAnswersOnlyItsOrigins(t *testing.T) {
	const uiOrigin = "http://127.0.0.1:28233"
	c := startCodecCommand(t, nil, "--web-ui-origin", uiOrigin)
	port := c.url[strings.LastIndex(c.url, ":")+1:]
	checkCodecCalls(t, c.url, []codecCall{
		{name: "preflight from the UI", method: http.MethodOptions, origin: uiOrigin, want: http.StatusNoContent},
		{name: "decode from the UI", method: http.MethodPost, origin: uiOrigin, want: http.StatusOK},
		{name: "decode from the CLI", method: http.MethodPost, want: http.StatusOK},
		{name: "decode from the CLI as localhost", method: http.MethodPost, host: "localhost:" + port, want: http.StatusOK},
		{name: "preflight from another UI", method: http.MethodOptions, origin: "http://localhost:8233", want: http.StatusForbidden},
		{name: "decode from another origin", method: http.MethodPost, origin: "https://attacker.example", want: http.StatusForbidden},
		{name: "DNS rebinding: a foreign Host with the UI's origin", method: http.MethodPost, host: "evil.example:" + port, origin: uiOrigin, want: http.StatusForbidden},
		{name: "text/plain", method: http.MethodPost, contentType: "text/plain", want: http.StatusUnsupportedMediaType},
		{name: "over 8 MiB", method: http.MethodPost, body: bytes.NewReader(bytes.Repeat([]byte(" "), codec.MaxRequestBytes+1)), want: http.StatusRequestEntityTooLarge},
	})
	c.stop(t)
	for _, want := range []string{"https://attacker.example", "http://localhost:8233", "--web-ui-origin", "evil.example:" + port, "--allowed-host", "text/plain"} {
		if !strings.Contains(c.stderr.String(), want) {
			t.Errorf("codec-server's log lacks %q:\n%s", want, c.stderr.String())
		}
	}
	if strings.Contains(c.stderr.String(), "payload-key-for-e2e") || strings.Contains(c.stderr.String(), "cGF5bG9hZC1rZXk") {
		t.Errorf("codec-server logged its key:\n%s", c.stderr.String())
	}
}

// TestCodecServerCommandWithToken runs `siteops codec-server` with
// SITEOPS_CODEC_TOKEN, then with --token-file: every /encode and /decode
// needs "Authorization: Bearer <token>" — the form the temporal CLI's
// --codec-auth sends — whatever its origin (401 otherwise, the token
// checked before the body is looked at); preflights, which browsers send
// without it, do not; the Host and Content-Type checks still apply; and the
// token shows in no output.
func TestCodecServerCommandWithToken(t *testing.T) {
	const uiOrigin = "http://127.0.0.1:28233"
	token := base64.StdEncoding.EncodeToString([]byte("codec-token-for-e2e-0123456789ab"))
	tokenFile := filepath.Join(t.TempDir(), "codec-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, setup := range []struct {
		name string
		env  []string
		args []string
	}{
		{"SITEOPS_CODEC_TOKEN", []string{"SITEOPS_CODEC_TOKEN=" + token}, nil},
		{"--token-file", nil, []string{"--token-file", tokenFile}},
	} {
		t.Run(setup.name, func(t *testing.T) {
			c := startCodecCommand(t, setup.env, append([]string{"--web-ui-origin", uiOrigin}, setup.args...)...)
			if !strings.Contains(c.stdout, "bearer token required") {
				t.Errorf("codec-server printed %q, want it to say a token is required", c.stdout)
			}
			port := c.url[strings.LastIndex(c.url, ":")+1:]
			bearer := "Bearer " + token
			checkCodecCalls(t, c.url, []codecCall{
				{name: "decode with the token", method: http.MethodPost, auth: bearer, want: http.StatusOK},
				{name: "decode from the UI with the token", method: http.MethodPost, origin: uiOrigin, auth: bearer, want: http.StatusOK},
				{name: "preflight from the UI", method: http.MethodOptions, origin: uiOrigin, want: http.StatusNoContent},
				{name: "decode without a token", method: http.MethodPost, want: http.StatusUnauthorized},
				{name: "decode from the UI without a token", method: http.MethodPost, origin: uiOrigin, want: http.StatusUnauthorized},
				{name: "decode with a wrong token", method: http.MethodPost, auth: bearer + "x", want: http.StatusUnauthorized},
				{name: "decode over 8 MiB without a token", method: http.MethodPost, body: bytes.NewReader(bytes.Repeat([]byte(" "), codec.MaxRequestBytes+1)), want: http.StatusUnauthorized},
				{name: "decode over 8 MiB with the token", method: http.MethodPost, auth: bearer, body: bytes.NewReader(bytes.Repeat([]byte(" "), codec.MaxRequestBytes+1)), want: http.StatusRequestEntityTooLarge},
				{name: "text/plain with the token", method: http.MethodPost, auth: bearer, contentType: "text/plain", want: http.StatusUnsupportedMediaType},
				{name: "a foreign Host with the token", method: http.MethodPost, host: "evil.example:" + port, origin: uiOrigin, auth: bearer, want: http.StatusForbidden},
			})
			c.stop(t)
			if !strings.Contains(c.stderr.String(), "bearer token") {
				t.Errorf("codec-server's log does not mention the refused token:\n%s", c.stderr.String())
			}
			if strings.Contains(c.stderr.String()+c.stdout, token) {
				t.Errorf("codec-server showed its token:\n%s\n%s", c.stdout, c.stderr.String())
			}
		})
	}
}
