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
	"github.com/siteops/siteops/internal/ports"
	"github.com/siteops/siteops/simulator"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/webhookingress/ingresstest"
)

// ingressProc is a `siteops ingress` process started by a test.
type ingressProc struct {
	url, admin string // the webhook port and the admin address
	addr       string // host:port of the webhook port
	pid        int
	log        *syncBuffer
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
	p := &ingressProc{addr: "127.0.0.1:" + itoa(ps[0]), log: &syncBuffer{}}
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
	eventually(t, 20*time.Second, "the ingress to be ready", func() bool {
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
			if code != http.StatusOK || took > time.Second {
				t.Errorf("a valid delivery during the attack = %d after %s; want 200 within 1 s", code, took.Round(time.Millisecond))
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
		if code != http.StatusOK || took > time.Second {
			t.Errorf("a valid delivery during the slow forged uploads = %d after %s; want 200 within 1 s", code, took.Round(time.Millisecond))
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
	if nl < 64 || sl < 2500*time.Millisecond || sl > 4*time.Second {
		t.Errorf("slow bodies at the cap: %d cut, the shortest held %s; want every slot's body cut after about 3 s", nl, sl)
	}
	if ns == 0 || ss < 800*time.Millisecond || ls > 2*time.Second {
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
	eventually(t, 10*time.Second, "the delivery to be counted on the admin address", func() bool {
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
