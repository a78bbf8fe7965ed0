package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/ingress/ingresstest"
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
)

// ingressProc is a `siteops ingress` process started by a test.
type ingressProc struct {
	url, admin string // the webhook port and the admin address
	addr       string // host:port of the webhook port
	pid        int
	log        *siteopstest.Log
}

// startMeasuredIngress runs `siteops ingress` on a webhook port and an
// admin address of its own until the test ends, waits until it is ready,
// and returns it with its process id.
func (e *env) startMeasuredIngress(t *testing.T, extra ...string) *ingressProc {
	t.Helper()
	ps, err := ports.FreeN(2)
	if err != nil {
		t.Fatal(err)
	}
	p := &ingressProc{addr: "127.0.0.1:" + itoa(ps[0]), log: &siteopstest.Log{}}
	adminAddr := "127.0.0.1:" + itoa(ps[1])
	cmd := exec.Command(binary, "ingress")
	cmd.Env = append(e.cliEnv(), append([]string{"SITEOPS_INGRESS_ADDR=" + p.addr, "SITEOPS_INGRESS_ADMIN_ADDR=" + adminAddr}, extra...)...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() })
	p.url, p.admin, p.pid = "http://"+p.addr, "http://"+adminAddr, cmd.Process.Pid
	siteopstest.Eventually(t, 20*time.Second, "the ingress to be ready", func() bool {
		resp, err := http.Get(p.admin + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// rssMiB reads the resident set size of a process from /proc.
func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// slowUpload is one attacker: it sends a request head with the given
// svc-signature and a declared body of 1 MiB, pushes most of the body at
// once, then trickles the rest a byte at a time, as long as the server
// takes it; when the server closes the connection it opens another.
func slowUpload(ctx context.Context, addr, signature string, requests *atomic.Int64) {
	const declared = 1 << 20
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'a'
	}
	for ctx.Err() == nil {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		requests.Add(1)
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		_ = conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, err = fmt.Fprintf(conn, "POST /webhooks HTTP/1.1\r\nHost: ingress\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
			"svc-event-id: evt_junk\r\nsvc-event-type: lead.created\r\nsvc-signature: %s\r\n\r\n", declared, signature)
		sent := 0
		for err == nil && sent < declared-64<<10 {
			var n int
			n, err = conn.Write(chunk)
			sent += n
		}
		for err == nil && sent < declared && ctx.Err() == nil {
			_, err = conn.Write(chunk[:1])
			sent++
			sleepCtx(ctx, 100*time.Millisecond)
		}
		stop()
		_ = conn.Close()
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// TestIngressMemoryUnderSlowJunkUploads is item 1 of the hardening issue
// against a real `siteops ingress` process: 200 clients keep uploading
// 1 MiB bodies slowly under the junk header t=1,v1=x. The process's RSS
// stays under 128 MiB, and a valid signed delivery sent meanwhile is
// answered 200 within 1 s. Before the fix the body was read before the
// header was looked at (438 MiB measured).
func TestIngressMemoryUnderSlowJunkUploads(t *testing.T) {
	const attackers, limitMiB = 200, 128.0
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_dos_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret, "SITEOPS_LOG_LEVEL=error")
	base := rssMiB(t, p.pid)

	ctx, cancel := context.WithCancel(t.Context())
	var requests atomic.Int64
	var wg sync.WaitGroup
	for range attackers {
		wg.Go(func() { slowUpload(ctx, p.addr, "t=1,v1=x", &requests) })
	}
	defer func() { cancel(); wg.Wait() }()

	peak := base
	sample := func() { peak = max(peak, rssMiB(t, p.pid)) }
	var lat []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < 10*time.Second; i++ {
		sample()
		if i%10 == 5 { // one valid delivery a second, from the second half-second on
			t0 := time.Now()
			code := deliver(t, p.url, "/webhooks", fmt.Sprintf("evt_valid_%d", i), secret)
			took := time.Since(t0)
			lat = append(lat, took)
			if bound := siteopstest.Bound(time.Second); code != http.StatusOK || took > bound {
				t.Errorf("a valid delivery during the attack = %d after %s; want 200 within %s", code, took.Round(time.Millisecond), bound)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	sample()
	slices.Sort(lat)
	t.Logf("RESULT slow junk uploads: %d attackers, %d requests; ingress RSS %.1f MiB before, peak %.1f MiB during; valid deliveries %d, latency max %s",
		attackers, requests.Load(), base, peak, len(lat), lat[len(lat)-1].Round(time.Millisecond))
	if peak >= limitMiB {
		t.Errorf("the ingress's RSS reached %.1f MiB under %d slow junk uploads; want under %.0f MiB", peak, attackers, limitMiB)
	}
	if requests.Load() < attackers {
		t.Errorf("only %d attack requests were made", requests.Load())
	}
}

// TestIngressSlowForgedUploadsDoNotDelayValidDeliveries is the attack the
// checks before the body cannot stop, against a real `siteops ingress`:
// more clients than there are slots send deliveries whose signature header
// is well formed and current, to a receiver that exists, and upload their
// bodies a byte every 100 ms — half declaring bodies at the 256 KiB cap,
// half small ones. Each slow body is cut after its deadline (3 s at the
// cap, 1 s small) instead of holding a slot for the sender's 10 s, and a
// valid delivery sent meanwhile is answered 200 within 1 s.
func TestIngressSlowForgedUploadsDoNotDelayValidDeliveries(t *testing.T) {
	const perLane = 80 // more than the 64 slots of the large lane
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_slow_forged_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret, "SITEOPS_LOG_LEVEL=error")

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	heldLarge, heldSmall := make(chan time.Duration, 10*perLane), make(chan time.Duration, 10*perLane)
	for range perLane {
		wg.Go(func() { ingresstest.SlowForgedUpload(ctx, p.addr, 256<<10, heldLarge) })
		wg.Go(func() { ingresstest.SlowForgedUpload(ctx, p.addr, 400, heldSmall) })
	}
	var lat []time.Duration
	pace := time.NewTicker(500 * time.Millisecond)
	defer pace.Stop()
	for i := range 16 { // 8 s, the first delivery half a second into the attack
		<-pace.C
		t0 := time.Now()
		code := deliver(t, p.url, "/webhooks", fmt.Sprintf("evt_valid_%d", i), secret)
		took := time.Since(t0)
		lat = append(lat, took)
		if bound := siteopstest.Bound(time.Second); code != http.StatusOK || took > bound {
			t.Errorf("a valid delivery during the slow forged uploads = %d after %s; want 200 within %s", code, took.Round(time.Millisecond), bound)
		}
	}
	// A connection's time includes its wait for a slot: the 16 clients
	// at the cap beyond the 64 slots wait for one. The shortest is a body
	// that had a slot at once, cut at its deadline.
	nl, sl, ll := ingresstest.Drain(heldLarge)
	ns, ss, ls := ingresstest.Drain(heldSmall)
	slices.Sort(lat)
	t.Logf("RESULT slow forged uploads: %d clients (%d at the 256 KiB cap, %d small); slow bodies cut: %d at the cap (held %s to %s), %d small (held %s to %s); valid deliveries %d, latency max %s",
		2*perLane, perLane, perLane, nl, sl.Round(time.Millisecond), ll.Round(time.Millisecond), ns, ss.Round(time.Millisecond), ls.Round(time.Millisecond), len(lat), lat[len(lat)-1].Round(time.Millisecond))
	if nl < 64 || sl < 2500*time.Millisecond || sl > siteopstest.Bound(4*time.Second) {
		t.Errorf("slow bodies at the cap: %d cut, the shortest held %s; want every slot's body cut after about 3 s", nl, sl)
	}
	if ns == 0 || ss < 800*time.Millisecond || ls > siteopstest.Bound(2*time.Second) {
		t.Errorf("slow small bodies: %d cut, held %s to %s; want them cut after about 1 s", ns, ss, ls)
	}
}

// TestIngressAdminAddress is item 5: /metrics and /readyz are served on the
// admin address only; the webhook port answers webhooks and /healthz.
func TestIngressAdminAddress(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_admin_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret)
	get := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 404, "/metrics": 404} {
		if code := get(p.url + path); code != want {
			t.Errorf("webhook port GET %s = %d, want %d", path, code, want)
		}
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		if code := get(p.admin + path); code != want {
			t.Errorf("admin address GET %s = %d, want %d", path, code, want)
		}
	}
	if code := deliver(t, p.url, "/webhooks", "evt_admin_1", secret); code != http.StatusOK {
		t.Errorf("a delivery on the webhook port = %d", code)
	}
	siteopstest.Eventually(t, 10*time.Second, "the delivery to be counted on the admin address", func() bool {
		return strings.Contains(scrape(t, p.admin+"/metrics"), `siteops_webhook_deliveries_total{outcome="accepted",reason=""} 1`)
	})
}

// TestMalformedDeliveryListedAsMalformed is item 10 end to end: a delivery
// that verifies but whose created_at the parser refuses is answered 200 by
// the ingress process and shown by `siteops events list --outcome
// malformed`.
func TestMalformedDeliveryListedAsMalformed(t *testing.T) {
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_malformed_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret)
	body := `{"id":"evt_bad_date","type":"lead.created","created_at":"21/11/2026 09:00","data":{"site_id":"site_x","lead_id":"lead_1"}}`
	code := deliverBody(t, p.url+"/webhooks", "evt_bad_date", "lead.created", body, secret)
	if code != http.StatusOK {
		t.Fatalf("a verified delivery with a bad created_at = %d, want 200 (the contract: non-2xx only to ask for a retry)", code)
	}
	out, exit := e.run(t, nil, "events", "list", "--outcome", "malformed")
	if exit != 0 || !strings.Contains(out, "malformed_") || !strings.Contains(out, "lead.created") {
		t.Errorf("events list --outcome malformed: exit %d\n%s", exit, out)
	}
	if strings.Contains(p.log.String(), secret) {
		t.Error("the ingress logged the secret")
	}
}

// deliverBody posts body to url signed with secret now, with the given
// event headers, and returns the status.
func deliverBody(t *testing.T, url, id, typ, body, secret string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("svc-event-id", id)
	req.Header.Set("svc-event-type", typ)
	req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// deliverTimed posts a valid signed delivery to url+"/webhooks" on a
// connection of its own and returns its status (0 when it failed) and how
// long the answer took.
func deliverTimed(t *testing.T, url, id, secret string) (int, time.Duration) {
	t.Helper()
	body := `{"id":"` + id + `","type":"lead.created","created_at":"2026-11-22T09:00:00.000Z","data":{"site_id":"site_x","lead_id":"lead_1"}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/webhooks", strings.NewReader(body))
	req.Header.Set("svc-event-id", id)
	req.Header.Set("svc-event-type", "lead.created")
	req.Header.Set("svc-signature", webhook.Sign(secret, time.Now(), []byte(body)))
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	start := time.Now()
	resp, err := hc.Do(req)
	took := time.Since(start)
	if err != nil {
		t.Logf("delivery %s: %v", id, err)
		return 0, took
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, took
}

// metricValue reads one unlabelled sample (or the first of a family) from a
// /metrics text, -1 when absent.
func metricValue(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// TestIngressFreshJunkHoldsNoSlot is item 2 of the security review against
// a real `siteops ingress`: 1,600 clients each send a delivery's head with a
// current t=, a made-up 64-hex v1 and Content-Length: 8000, then no body,
// and reconnect as soon as the ingress cuts them (1,600 such connections
// held open). Before the fix each held a slot of the small lane (256) for
// about a second, and valid deliveries took 4.65–5.0 s (two got 503); now a
// body being read holds no slot, and each of 20 valid deliveries sent
// meanwhile is answered 2xx within 1 s (3 s under the race detector).
func TestIngressFreshJunkHoldsNoSlot(t *testing.T) {
	const junk = 1600
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_fresh_junk_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret, "SITEOPS_LOG_LEVEL=error")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	held := make(chan time.Duration, 8*junk)
	// The clients start over a second, as a flood builds up, rather than
	// in one instant: 1,600 goroutines of this process waking together
	// every second would delay this process's own valid deliveries under
	// the race detector, which is not what the test measures.
	for i := range junk {
		wg.Go(func() {
			sleepCtx(ctx, time.Duration(i)*time.Second/junk)
			ingresstest.SilentForgedUpload(ctx, p.addr, 8000, held)
		})
	}
	siteopstest.Eventually(t, 20*time.Second, "1,500 junk connections open", func() bool {
		return metricValue(scrape(t, p.admin+"/metrics"), "siteops_webhook_connections") >= 1500
	})
	// Under the race detector the 1,600 clients of this process, slowed
	// five to ten times, take most of the machine's two cores from the
	// ingress: the bound is scaled there (before the fix deliveries took
	// 4.3-5.1 s, or got 503, either way), and checked at 1 s without it
	// (go test without -race; bench/README.md).
	bound := siteopstest.Bound(time.Second)
	var lat []time.Duration
	pace := time.NewTicker(250 * time.Millisecond)
	defer pace.Stop()
	for i := range 20 {
		<-pace.C
		code, took := deliverTimed(t, p.url, fmt.Sprintf("evt_fresh_valid_%d", i), secret)
		lat = append(lat, took)
		if code < 200 || code > 299 || took > bound {
			t.Errorf("valid delivery %d among %d fresh junk connections = %d after %s; want 2xx within %s", i, junk, code, took.Round(time.Millisecond), bound)
		}
	}
	n, shortest, longest := ingresstest.Drain(held)
	open := metricValue(scrape(t, p.admin+"/metrics"), "siteops_webhook_connections")
	slices.Sort(lat)
	t.Logf("RESULT fresh junk: %d clients (%.0f connections open at the end); junk connections cut: %d (held %s to %s); valid deliveries %d, latency median %s, max %s",
		junk, open, n, shortest.Round(time.Millisecond), longest.Round(time.Millisecond), len(lat), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

// bodylessRouteJunk is one connection of issue 32's flood: GET /healthz
// announcing a body of 200,000 bytes that never comes. It returns the
// status the ingress answered (0: none) and how long the ingress kept the
// connection, until it closed it or ctx ended (then it closes it itself).
func bodylessRouteJunk(ctx context.Context, addr string) (int, time.Duration) {
	start := time.Now()
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, time.Since(start)
	}
	defer func() { _ = c.Close() }()
	defer context.AfterFunc(ctx, func() { _ = c.Close() })()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: ingress\r\nContent-Length: 200000\r\n\r\n"); err != nil {
		return 0, time.Since(start)
	}
	br := bufio.NewReaderSize(c, 512)
	code := 0
	if resp, err := http.ReadResponse(br, nil); err == nil {
		code = resp.StatusCode
		_ = resp.Body.Close()
	}
	_, _ = io.Copy(io.Discard, br)
	return code, time.Since(start)
}

// TestIngressBodiesOnBodylessRoutesHoldNoSlot is item 4 of issue 32
// against a real `siteops ingress`: connections that send GET /healthz with
// Content-Length: 200000 and then nothing open at 400 a second for 12 s
// (4,800 in all, to 127.0.0.1 only), while a valid delivery is sent every
// 100 ms on a connection of its own. Before the fix the ingress answered
// such a request and then waited for its body to drain it, for the whole
// 15 s read timeout, on a connection the cap counted busy and never
// closed: about 140 a second kept all 2,048 places full, and valid
// deliveries got 503 from about the fifth second on. Now each is answered
// 413 body_not_allowed and closed at once, and every valid delivery is
// answered 2xx, none 503, with p99 under 1 s (3 s under the race
// detector, as the other floods: this process's own clients, slowed by it,
// share the two cores with the ingress).
func TestIngressBodiesOnBodylessRoutesHoldNoSlot(t *testing.T) {
	const perSecond, flood = 400, 12 * time.Second
	const junk = perSecond * int(flood/time.Second)
	raiseFileLimit(t, uint64(junk)+1000)
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_bodyless_junk_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret, "SITEOPS_LOG_LEVEL=error")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	type junkResult struct {
		code int
		held time.Duration
	}
	junked := make(chan junkResult, junk)
	wg.Go(func() {
		// Ten connections every 25 ms, each left to the ingress.
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for sent := 0; sent < junk; sent += 10 {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for range 10 {
				wg.Go(func() {
					code, held := bodylessRouteJunk(ctx, p.addr)
					junked <- junkResult{code, held}
				})
			}
		}
	})
	bound := siteopstest.Bound(time.Second)
	var lat []time.Duration
	codes := map[int]int{}
	pace := time.NewTicker(100 * time.Millisecond)
	defer pace.Stop()
	for start, i := time.Now(), 0; time.Since(start) < flood; i++ {
		<-pace.C
		code, took := deliverTimed(t, p.url, fmt.Sprintf("evt_bodyless_valid_%d", i), secret)
		lat = append(lat, took)
		codes[code]++
	}
	metrics := scrape(t, p.admin+"/metrics")
	cancel()
	wg.Wait()
	close(junked)
	junkCodes := map[int]int{}
	var held []time.Duration
	for r := range junked {
		junkCodes[r.code]++
		held = append(held, r.held)
	}
	slices.Sort(lat)
	slices.Sort(held)
	p99 := lat[(len(lat)*99+99)/100-1]
	heldP99 := held[(len(held)*99+99)/100-1]
	count := func(sample string) float64 { return max(metricValue(metrics, sample), 0) } // absent: none
	shed := 0.0
	for _, action := range []string{"closed_answered", "closed_idle", "closed_slow", "closed_busy"} {
		shed += count(`siteops_webhook_connections_shed_total{action="` + action + `"}`)
	}
	t.Logf("RESULT bodyless-route junk: %d connections (GET /healthz, Content-Length: 200000, no body) at %d/s for %s, answered %v (status: count), held p99 %s, max %s; %.0f refused body_not_allowed, %.0f connections closed at the cap, %.0f refused there; valid deliveries %d, answered %v, latency median %s, p99 %s, max %s",
		len(held), perSecond, flood, junkCodes, heldP99.Round(time.Millisecond), held[len(held)-1].Round(time.Millisecond),
		count(`siteops_webhook_deliveries_total{outcome="rejected",reason="body_not_allowed"}`), shed,
		count(`siteops_webhook_connections_shed_total{action="refused"}`),
		len(lat), codes, lat[len(lat)/2].Round(time.Millisecond), p99.Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	for code, n := range codes {
		if code < 200 || code > 299 {
			t.Errorf("%d of %d valid deliveries during the flood were answered %d; want every one 2xx (none 503)", n, len(lat), code)
		}
	}
	if p99 >= bound {
		t.Errorf("valid deliveries during the flood: p99 %s; want under %s", p99.Round(time.Millisecond), bound)
	}
	if len(held) < junk*9/10 || junkCodes[http.StatusRequestEntityTooLarge] < len(held)*9/10 || heldP99 >= bound {
		t.Errorf("junk connections: %d made, answered %v, held p99 %s; want at least %d, nine in ten answered 413 and closed within %s", len(held), junkCodes, heldP99, junk*9/10, bound)
	}
}

// raiseFileLimit raises the test process's open-file soft limit to its hard
// limit, and skips the test when even that is below need.
func raiseFileLimit(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	if lim.Cur < need {
		t.Skipf("SKIP: this machine lets a process open %d files (ulimit -n, hard limit); the test needs %d: raise the hard limit to run it", lim.Cur, need)
	}
}

// TestIngressIdleConnectionsAreBounded is item 3 of the security review
// against a real `siteops ingress` under deploy/'s GOMEMLIMIT=200MiB:
// 11,000 keep-alive connections, each left idle after one GET /healthz (the
// review measured 252 MiB and 11,018 goroutines before the fix), then 1,500
// deliveries' heads with 7 KB of padding headers whose bodies never come.
// The process's RSS stays under 200 MiB throughout, its connections at the
// cap, and a valid delivery after each phase is answered 2xx within 1 s.
// 30 KB of padding headers, as in the review, are refused with 431.
func TestIngressIdleConnectionsAreBounded(t *testing.T) {
	const idle, padded, limitMiB = 11000, 1500, 200.0
	raiseFileLimit(t, idle+padded+1000)
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_idle_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret, "SITEOPS_LOG_LEVEL=error", "GOMEMLIMIT=200MiB")
	base := rssMiB(t, p.pid)
	peak := base
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	ok := 0
	for i := range idle {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: ingress\r\n\r\n"); err == nil {
			if resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil); err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok++
				}
			}
		}
		if i%500 == 0 {
			peak = max(peak, rssMiB(t, p.pid))
		}
	}
	peak = max(peak, rssMiB(t, p.pid))
	metrics := scrape(t, p.admin+"/metrics")
	open, goroutines := metricValue(metrics, "siteops_webhook_connections"), metricValue(metrics, "go_goroutines")
	closedIdle := metricValue(metrics, `siteops_webhook_connections_shed_total{action="closed_idle"}`)
	code, took := deliverTimed(t, p.url, "evt_idle_valid", secret)
	if bound := siteopstest.Bound(time.Second); code < 200 || code > 299 || took > bound {
		t.Errorf("a valid delivery with %d idle connections made = %d after %s; want 2xx within %s", idle, code, took.Round(time.Millisecond), bound)
	}
	t.Logf("RESULT idle connections: %d made, %d answered; ingress RSS %.1f MiB before, peak %.1f MiB; %.0f connections open, %.0f closed idle to make room, %.0f goroutines; valid delivery %d after %s",
		idle, ok, base, peak, open, closedIdle, goroutines, code, took.Round(time.Millisecond))
	if ok < idle*9/10 {
		t.Errorf("only %d of %d idle connections were answered", ok, idle)
	}

	// The heads of deliveries whose bodies never come, with 7 KB of padding.
	pad := strings.Repeat("p", 1000)
	var head strings.Builder
	fmt.Fprintf(&head, "POST /webhooks HTTP/1.1\r\nHost: ingress\r\nContent-Length: 8000\r\nsvc-signature: t=%d,v1=%s\r\n", time.Now().Unix(), strings.Repeat("ab", 32))
	for i := range 7 {
		fmt.Fprintf(&head, "X-Pad-%d: %s\r\n", i, pad)
	}
	head.WriteString("\r\n")
	for i := range padded {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("padded connection %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, head.String())
		if i%100 == 0 {
			peak = max(peak, rssMiB(t, p.pid))
		}
	}
	peak = max(peak, rssMiB(t, p.pid))
	code, took = deliverTimed(t, p.url, "evt_padded_valid", secret)
	if bound := siteopstest.Bound(time.Second); code < 200 || code > 299 || took > bound {
		t.Errorf("a valid delivery after %d padded heads = %d after %s; want 2xx within %s", padded, code, took.Round(time.Millisecond), bound)
	}
	peak = max(peak, rssMiB(t, p.pid))
	t.Logf("RESULT padded heads: %d with 7 KB of headers; ingress peak RSS %.1f MiB; valid delivery %d after %s", padded, peak, code, took.Round(time.Millisecond))
	if peak >= limitMiB {
		t.Errorf("the ingress's RSS reached %.1f MiB; want under %.0f MiB", peak, limitMiB)
	}

	// 30 KB of padding headers are refused before the handler.
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	var big strings.Builder
	big.WriteString("POST /webhooks HTTP/1.1\r\nHost: ingress\r\nContent-Length: 2\r\n")
	for i := range 30 {
		fmt.Fprintf(&big, "X-Pad-%d: %s\r\n", i, pad)
	}
	big.WriteString("\r\n{}")
	go func() { _, _ = io.WriteString(c, big.String()) }()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("30 KB of padding headers: %v %v; want 431", resp, err)
	}
}

// TestIngressHostHeadersAddNoSeries is item 4 of the security review
// against a real `siteops ingress`: 2,100 unauthenticated GET /nope, each
// with a Host header of its own (the review saw about 2,000 label values,
// 106,000 series, a 26 MB /metrics and RSS 50 → 109 MB), leave /metrics
// under 1 MB with one server_address, and the process's RSS grows by less
// than 20 MiB.
func TestIngressHostHeadersAddNoSeries(t *testing.T) {
	const n = 2100
	e := newEnv(t, store.SQLite, simulator.Config{})
	const secret = "whsec_hosts_e2e" //nolint:gosec // made up for the test
	p := e.startMeasuredIngress(t, "SITEOPS_WEBHOOK_SECRETS="+secret, "SITEOPS_LOG_LEVEL=error")
	// One of each request first, so that the growth measured is what
	// distinct Hosts add, not the first series of each kind.
	if code, _ := deliverTimed(t, p.url, "evt_hosts_first", secret); code != http.StatusOK {
		t.Fatalf("first delivery = %d", code)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	get := func(host string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, p.url+"/nope", nil)
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	get("warm-up")
	_ = scrape(t, p.admin+"/metrics")
	base := rssMiB(t, p.pid)
	for i := range n {
		get(fmt.Sprintf("h%d.attacker.example:%d", i, 1+i))
	}
	text := scrape(t, p.admin+"/metrics")
	after := rssMiB(t, p.pid)
	hosts := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if _, rest, ok := strings.Cut(l, `server_address="`); ok {
			v, _, _ := strings.Cut(rest, `"`)
			hosts[v] = true
		}
	}
	t.Logf("RESULT distinct Hosts: %d requests; /metrics %d bytes, %d server_address values; ingress RSS %.1f MiB before, %.1f MiB after", n, len(text), len(hosts), base, after)
	if len(text) >= 1<<20 || len(hosts) > 1 {
		t.Errorf("/metrics is %d bytes with %d server_address values after %d distinct Hosts; want under 1 MB and 1", len(text), len(hosts), n)
	}
	if after-base >= 20 {
		t.Errorf("the ingress's RSS grew by %.1f MiB over %d distinct Hosts; want under 20 MiB", after-base, n)
	}
}
