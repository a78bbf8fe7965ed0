package agentsite

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentCallsKeepTheirConnections: a burst of concurrent calls
// opens a connection each, and the next burst reuses them instead of
// opening them again (with Go's default of two idle connections per host,
// all but two were closed after each burst: against the real API, a TLS
// handshake per call of every burst of uploads).
func TestConcurrentCallsKeepTheirConnections(t *testing.T) {
	const burst = 16
	var opened atomic.Int64
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var round atomic.Int64
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release[round.Load()] // hold every call of the burst open at once
		answer(200, `{"data":[]}`)(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newTestClient(t, srv.URL)
	for r := range 2 {
		round.Store(int64(r))
		arrived.Add(burst)
		var done sync.WaitGroup
		for range burst {
			done.Go(func() {
				if _, err := c.ListWebhookEndpoints(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		arrived.Wait()
		close(release[r])
		done.Wait()
		// The transport puts a connection back in its pool just after the
		// call that used it returned: give it that moment, and allow two
		// connections for a slow hand-back (Go's default reopened 14).
		time.Sleep(100 * time.Millisecond)
		if got := opened.Load(); got < burst || got > burst+2 {
			t.Fatalf("after burst %d of %d concurrent calls: %d connections opened in all, want %d (the first burst's, kept)", r+1, burst, got, burst)
		}
	}
}
