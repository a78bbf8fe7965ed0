package simulator

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkCreateSiteWithKeysHeld creates sites, each under an idempotency
// key of its own, while the simulator holds keysHeld keys within their
// retention (a long run's worth): a create expires the keys whose time is
// up, and should cost no more for the keys it keeps.
func BenchmarkCreateSiteWithKeysHeld(b *testing.B) {
	const keysHeld = 20000
	sim, err := New(testConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sim.Close)
	h := sim.Handler()
	create := func(i int) {
		body := fmt.Sprintf(`{"title":"Bench","slug":"bench-%d","type":"business","template":"minimal"}`, i)
		req := httptest.NewRequestWithContext(b.Context(), http.MethodPost, "/api/v1/sites", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyAll)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-%d", i))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("create %d = %d %s", i, rec.Code, rec.Body)
		}
	}
	for i := range keysHeld {
		create(i)
	}
	b.ResetTimer()
	for i := range b.N {
		create(keysHeld + i)
	}
}
