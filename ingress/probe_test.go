package ingress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/siteops/siteops/agentsite"
	"github.com/siteops/siteops/agentsite/webhook"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
	"github.com/siteops/siteops/telemetry/telemetrytest"
)

// storeSecrets stores, for each endpoint id, a secret named whsec_<id> on
// its receiver.
func storeSecrets(t *testing.T, st *store.Store, receivers map[string]string) {
	t.Helper()
	for id, receiver := range receivers {
		if err := st.PutSecret(t.Context(), id, receiver, agentsite.NewSigningSecret("whsec_"+id)); err != nil {
			t.Fatal(err)
		}
	}
}

// damage makes the stored secrets of the endpoints fail to decrypt, as a
// bad restore or an edit leaves them.
func damage(t *testing.T, st *store.Store, endpoints ...string) {
	t.Helper()
	ctx := t.Context()
	for _, id := range endpoints {
		var sealed []byte
		if err := st.DB().QueryRowContext(ctx, `SELECT ciphertext FROM webhook_secrets WHERE endpoint_id = $1`, id).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		sealed[len(sealed)-1] ^= 0xff
		if _, err := st.DB().ExecContext(ctx, `UPDATE webhook_secrets SET ciphertext = $1 WHERE endpoint_id = $2`, sealed, id); err != nil {
			t.Fatal(err)
		}
	}
}

// rawAnswer sends a whole delivery to addr on a connection of its own and
// returns every byte of the answer, its Date header taken out, and whether
// the server then closed the connection.
func rawAnswer(t *testing.T, addr, path, secret, id string) (string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	body := envelope(id, "lead.created")
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nsvc-event-id: %s\r\nsvc-event-type: lead.created\r\nsvc-signature: %s\r\n\r\n%s",
		path, len(body), id, webhook.Sign(secret, time.Now(), []byte(body)), body)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var raw bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &raw))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", path, err)
	}
	_, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	closed := closedByServer(c, br, 2*time.Second)
	return dateHeader.ReplaceAllString(raw.String(), ""), closed
}

var dateHeader = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r\n`)

// countingBody is a body that counts the bytes read of it.
type countingBody struct {
	r    io.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

// TestUnknownAndDamagedReceiversAnswerAlike is point 4 of issue 32's item
// 4: a delivery to a receiver that does not exist, to one whose stored
// secrets are all damaged (signed with the damaged secret or forged), to
// one with a damaged secret beside a readable one, and a forged one to a
// receiver that is fine get byte for byte the same answer (401
// invalid_signature, Connection: close; only the Date differs), each after
// its body is read, so that a prober cannot tell which receiver names
// exist. The metrics and the log keep the real reason for on-call:
// unknown_receiver, secret_unreadable, invalid_signature.
func TestUnknownAndDamagedReceiversAnswerAlike(t *testing.T) {
	st := storetest.Open(t, store.SQLite)
	storeSecrets(t, st, map[string]string{"we_main": "main", "we_lone": "lonely", "we_ok": "mixed", "we_bad": "mixed"})
	damage(t, st, "we_lone", "we_bad")
	var logs bytes.Buffer
	var mu sync.Mutex
	reg := prometheus.NewRegistry()
	h := NewHandler(Options{Inbox: st, Secrets: st, Metrics: NewMetrics(reg), Registry: reg,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	addr, _ := serveWebhooks(t, h, connLimits{})
	if got, _ := rawAnswer(t, addr, "/webhooks/main", "whsec_we_main", "evt_fine"); !strings.HasPrefix(got, "HTTP/1.1 200 ") {
		t.Fatalf("a delivery to the receiver that is fine = %q, want 200", got)
	}
	tests := []struct{ name, path, secret, reason string }{
		{"a receiver that does not exist", "/webhooks/nobody", "whsec_forged", "unknown_receiver"},
		{"a receiver that does not exist, with another's secret", "/webhooks/nobody", "whsec_we_main", "unknown_receiver"},
		{"a receiver whose only secret is damaged, signed with it", "/webhooks/lonely", "whsec_we_lone", "secret_unreadable"},
		{"a receiver whose only secret is damaged, forged", "/webhooks/lonely", "whsec_forged", "secret_unreadable"},
		{"a damaged secret beside a readable one", "/webhooks/mixed", "whsec_we_bad", "secret_unreadable"},
		{"a forged delivery to a receiver that is fine", "/webhooks/main", "whsec_forged", "invalid_signature"},
	}
	answers := map[string][]string{}
	for i, tc := range tests {
		got, closed := rawAnswer(t, addr, tc.path, tc.secret, fmt.Sprintf("evt_probe_%d", i))
		answers[got] = append(answers[got], tc.name)
		if !closed {
			t.Errorf("%s: the connection stays open after the answer", tc.name)
		}
	}
	if len(answers) != 1 {
		for a, names := range answers {
			t.Errorf("%q answered to %s", a, strings.Join(names, "; "))
		}
	}
	for a := range answers {
		if !strings.HasPrefix(a, "HTTP/1.1 401 ") || !strings.Contains(a, `{"status":"invalid_signature"}`) || !strings.Contains(a, "Connection: close") || strings.Contains(a, "Retry-After") {
			t.Errorf("the answer is %q; want 401 invalid_signature with Connection: close and no Retry-After", a)
		}
	}
	for reason, want := range map[string]float64{"unknown_receiver": 2, "secret_unreadable": 3, "invalid_signature": 1} {
		if n := telemetrytest.Value(t, reg, "siteops_webhook_deliveries_total", "outcome", "rejected", "reason", reason); n != want {
			t.Errorf("rejected{%s} = %v, want %v", reason, n, want)
		}
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	for _, want := range []string{"reason=unknown_receiver", "reason=secret_unreadable", "reason=invalid_signature"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log does not say %s:\n%s", want, text)
		}
	}
	for _, secret := range []string{"whsec_we_main", "whsec_we_lone", "whsec_we_bad", "whsec_we_ok"} {
		if strings.Contains(text, secret) {
			t.Errorf("the log shows a secret")
		}
	}
	// Each is answered after its body is read.
	for _, tc := range tests {
		body := envelope("evt_read", "lead.created")
		cb := &countingBody{r: strings.NewReader(body)}
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, tc.path, cb)
		req.ContentLength = int64(len(body))
		req.Header.Set("svc-signature", webhook.Sign(tc.secret, time.Now(), []byte(body)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || cb.read != len(body) {
			t.Errorf("%s: %d after reading %d bytes of the body's %d; want 401 after the whole body", tc.name, rec.Code, cb.read, len(body))
		}
	}
}
