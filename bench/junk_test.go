package bench

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/siteops/siteops/ingress"
	"github.com/siteops/siteops/store"
	"github.com/siteops/siteops/store/storetest"
)

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, read: l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// BenchmarkIngressRejectsJunk sends b.N junk deliveries (svc-signature
// t=1,v1=x, a 256 KiB body) from 32 concurrent clients over loopback HTTP
// to the real ingress handler and reports how fast they are refused, how
// many bytes the server read per request (the body is refused unread), and
// the heap in use at the end. Each client sends its whole body, as a fast
// attacker does; the e2e test TestIngressMemoryUnderSlowJunkUploads covers
// the slow ones against a real process.
func BenchmarkIngressRejectsJunk(b *testing.B) {
	const bodySize = 256 << 10
	h := ingress.NewHandler(ingress.Options{Inbox: storetest.Open(b, store.SQLite), EnvSecrets: []string{secret}})
	var read atomic.Int64
	srv := httptest.NewUnstartedServer(ingress.Traced(h))
	srv.Listener = countingListener{Listener: srv.Listener, read: &read}
	srv.Start()
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	body := bytes.Repeat([]byte("a"), bodySize)
	var next, refused, failures atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				req, _ := http.NewRequest("POST", srv.URL+"/webhooks", bytes.NewReader(body))
				req.Header.Set("svc-signature", "t=1,v1=x")
				req.Header.Set("svc-event-id", "evt_junk")
				resp, err := hc.Do(req)
				if err != nil {
					// The server closes a refused request's connection
					// without reading its body; a client still writing it
					// may see the reset instead of the answer.
					refused.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusBadRequest {
					refused.Add(1)
				} else {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := b.Elapsed()
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d junk deliveries were not refused with 400", n)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "refused/s")
	b.ReportMetric(float64(read.Load())/float64(b.N), "server-read-B/req")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.Logf("%d junk requests of %d KiB: the server read %d bytes in all", b.N, bodySize>>10, read.Load())
}
