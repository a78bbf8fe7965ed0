package ingress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/internal/siteopstest"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// exchange sends head on a new connection to addr and nothing more, reads
// the answer, and returns it with its body and how long after the head
// the server closed the connection (0 when it kept it for wait).
func exchange(t *testing.T, addr, head string, wait time.Duration) (*http.Response, string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", wait, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !closedByServer(c, br, wait-time.Since(start)) {
		return resp, string(body), 0
	}
	return resp, string(body), time.Since(start)
}

// TestAnswersWithoutTheBodyCloseAtOnce is points 1 and 2 of issue 32's
// item 4: a request answered without its body being read — a route that
// takes no body announcing one (GET /healthz with Content-Length: 200000
// and no byte of it, as the flood did), a path or method of no route, a
// delivery refused on its header — is answered and its connection closed
// at once, far within the 15 s read timeout for which net/http would
// otherwise wait to drain the body, on a connection the cap counts as
// busy. GET /healthz without a body keeps its connection.
func TestAnswersWithoutTheBodyCloseAtOnce(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	var mu sync.Mutex
	h := NewHandler(Options{Inbox: st, EnvSecrets: []string{envSecret}, Metrics: NewMetrics(reg), Registry: reg, LogsPerSecond: 100,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	addr, l := serveWebhooks(t, h, connLimits{})
	current := func(length int) string {
		return fmt.Sprintf("POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nsvc-signature: %s\r\n\r\n", length, webhook.Sign(envSecret, time.Now(), []byte("{}")))
	}
	tests := []struct {
		name, head string
		want       int
		status     string // the answer's status text, when it has one
	}{
		{"GET /healthz announcing 200000 bytes", "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n", 413, "body_not_allowed"},
		{"GET /healthz announcing 10 MB", "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n", 413, "body_not_allowed"},
		{"GET /healthz with a chunked body", "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 413, "body_not_allowed"},
		{"a path of no route, with a body", "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n", 413, "body_not_allowed"},
		{"a method of no route, with a body", "PUT /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n", 413, "body_not_allowed"},
		{"a path of no route", "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404, ""},
		{"a method of no route", "GET /webhooks HTTP/1.1\r\nHost: x\r\n\r\n", 405, ""},
		{"a junk signature header", "POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\nsvc-signature: t=1,v1=x\r\n\r\n", 400, "malformed_signature_header"},
		{"a stale timestamp", fmt.Sprintf("POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\nsvc-signature: %s\r\n\r\n", webhook.Sign(envSecret, time.Now().Add(-time.Hour), []byte("{}"))), 401, "timestamp_outside_window"},
		{"a receiver name out of form", strings.Replace(current(200000), "/webhooks", "/webhooks/-x", 1), 401, "invalid_signature"},
		{"a declared length over the cap", current(DefaultMaxBody + 1), 413, "body_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, closed := exchange(t, addr, tc.head, 5*time.Second)
			if resp.StatusCode != tc.want || !strings.Contains(body, tc.status) {
				t.Errorf("answer %d %q, want %d %s", resp.StatusCode, body, tc.want, tc.status)
			}
			if !resp.Close {
				t.Errorf("the answer does not say Connection: close")
			}
			if closed == 0 || closed > siteopstest.Bound(time.Second) {
				t.Errorf("the server closed the connection %s after the head (0: not within 5 s); want at once", closed)
			}
		})
	}
	if n := telemetrytest.Value(t, reg, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", "body_not_allowed"); n != 5 {
		t.Errorf("rejected{body_not_allowed} = %v, want 5", n)
	}
	// The log line of a refusal that a limit made names the limit and the
	// setting.
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	for _, want := range []string{
		`reason=body_not_allowed status=413 event_id="" event_type="" path=/healthz limit="no body on a route other than POST /webhooks[/receiver]" setting=none`,
		`reason=body_too_large status=413`, `limit="bodies of at most 262144 bytes" setting=SITEOPS_INGRESS_MAX_BODY`,
		`reason=timestamp_outside_window`, `limit="signatures at most 5m0s from now" setting=SITEOPS_REPLAY_WINDOW`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %s:\n%s", want, text)
		}
	}
	// GET /healthz without a body, a probe's, keeps its connection.
	c, br := idleConn(t, addr)
	if closedByServer(c, br, 100*time.Millisecond) {
		t.Errorf("GET /healthz without a body lost its connection")
	}
	_ = c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for l.openNow() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted after every client closed", l.openNow())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openNow is how many connections the cap counts.
func (l *connLimiter) openNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}
