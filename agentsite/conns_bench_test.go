package agentsite

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// BenchmarkBurstsOverTLS sends bursts of 16 concurrent calls to a TLS
// server in this process, keeping Go's default of 2 idle connections per
// host ("go-default") or the client's MaxIdleConns ("client"): each
// connection closed after a burst costs the next one a TLS handshake, on
// both sides. b.N is the number of calls; ns/op is per call.
func BenchmarkBurstsOverTLS(b *testing.B) {
	srv := httptest.NewTLSServer(answer(http.StatusOK, `{"data":[]}`))
	b.Cleanup(srv.Close)
	for _, idle := range []struct {
		name string
		n    int
	}{{"go-default", 2}, {"client", MaxIdleConns}} {
		b.Run(fmt.Sprintf("idle=%s", idle.name), func(b *testing.B) {
			hc := srv.Client()
			t := hc.Transport.(*http.Transport).Clone()
			t.MaxIdleConns, t.MaxIdleConnsPerHost = MaxIdleConns, idle.n
			hc.Transport = t
			c, err := NewClient(srv.URL, testKey, WithHTTPClient(hc))
			if err != nil {
				b.Fatal(err)
			}
			const burst = 16
			for done := 0; done < b.N; done += burst {
				var wg sync.WaitGroup
				for range min(burst, b.N-done) {
					wg.Go(func() {
						if _, err := c.ListWebhookEndpoints(b.Context()); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}
