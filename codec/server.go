package codec

import (
	"net/http"
	"strings"

	"go.temporal.io/sdk/converter"
)

// Handler serves the Temporal codec-server protocol (POST /encode, POST
// /decode) for the Web UI and the CLI, answering CORS preflights from the
// given Web UI origins.
func Handler(c *AESGCM, origins []string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	allowed := map[string]bool{}
	for _, o := range origins {
		allowed[strings.TrimSuffix(o, "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); allowed[o] {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type,X-Namespace")
			w.Header().Set("Access-Control-Allow-Methods", "POST,OPTIONS")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusOK)
			return
		}
		inner.ServeHTTP(w, r)
	})
}
