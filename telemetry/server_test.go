package telemetry

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// serveForTest serves the metrics and readiness server within to on a
// loopback port until the test ends, and returns its address.
func serveForTest(t *testing.T, to serverTimeouts) string {
	t.Helper()
	tel, err := Setup(t.Context(), Options{Service: "siteops-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- tel.serve(t.Context(), ln, nil, to) }()
	t.Cleanup(func() {
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// closedWithin reads c until the server closes it and fails t unless that
// happens within limit; it returns how long it took.
func closedWithin(t *testing.T, c net.Conn, r io.Reader, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(limit)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, r)
	took := time.Since(start)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still held the connection after %v", took)
	}
	return took
}

// TestMetricsServerCutsOffSlowClients: a client that sends half a header
// and waits (slow loris), and a keep-alive connection left idle, are
// closed by the server within its timeouts.
func TestMetricsServerCutsOffSlowClients(t *testing.T) {
	to := serverTimeouts{readHeader: 200 * time.Millisecond, read: 400 * time.Millisecond, write: time.Second, idle: 300 * time.Millisecond}
	addr := serveForTest(t, to)

	t.Run("half a header", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: metrics\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		if took := closedWithin(t, c, c, 5*time.Second); took < to.readHeader/2 {
			t.Errorf("closed after %v; want it given its header timeout (%v)", took, to.readHeader)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: metrics\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("GET /healthz: %s, close %v; want 200 on a connection kept open", resp.Status, resp.Close)
		}
		closedWithin(t, c, br, 5*time.Second)
	})
}

// TestMetricsServerHasEveryTimeout: the server the worker runs bounds the
// header, the request, the answer and the idle time.
func TestMetricsServerHasEveryTimeout(t *testing.T) {
	for name, d := range map[string]time.Duration{
		"read header": metricsTimeouts.readHeader, "read": metricsTimeouts.read,
		"write": metricsTimeouts.write, "idle": metricsTimeouts.idle,
	} {
		if d <= 0 {
			t.Errorf("%s timeout = %v; want one", name, d)
		}
	}
}
