package agentsite

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestSpansNameTheRouteAndCarryNoHeaders(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	srv := newAPIServer(t, answer(200, `{"data":{"id":"site_42","status":"published"}}`))
	c := newTestClient(t, srv.URL, WithTracerProvider(tp))
	if _, err := c.Publish(t.Context(), "idem-key-1", "site_42", true); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name() != "POST /api/v1/sites/{site_id}/publish" {
		t.Errorf("span name = %q", s.Name())
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
		if strings.Contains(kv.Value.String(), testKey) || strings.Contains(kv.Value.String(), "Bearer") {
			t.Errorf("attribute %s carries the credential: %s", kv.Key, kv.Value.String())
		}
		if strings.Contains(strings.ToLower(string(kv.Key)), "header") {
			t.Errorf("span records a header: %s", kv.Key)
		}
	}
	if attrs["http.route"] != "/api/v1/sites/{site_id}/publish" || attrs["http.request.method"] != "POST" || attrs["http.response.status_code"] != "200" {
		t.Errorf("attributes = %v", attrs)
	}
	// The trace context goes out with the request so that the server's spans join the trace.
	want := s.SpanContext().TraceID().String()
	if got := srv.last(t).Header.Get("Traceparent"); !strings.Contains(got, want) {
		t.Errorf("traceparent = %q, want it to carry trace %s", got, want)
	}
}

func TestSigningSecretDoesNotPrint(t *testing.T) {
	s := NewSigningSecret("whsec_supersecretvalue")
	for _, out := range []string{s.String(), s.GoString(), s.LogValue().String()} {
		if strings.Contains(out, "supersecret") {
			t.Errorf("printed form %q carries the secret", out)
		}
	}
	b, _ := s.MarshalJSON()
	if strings.Contains(string(b), "supersecret") {
		t.Errorf("JSON %s carries the secret", b)
	}
	if s.Reveal() != "whsec_supersecretvalue" || len(s.Fingerprint()) != 12 {
		t.Errorf("Reveal/Fingerprint = %q/%q", s.Reveal(), s.Fingerprint())
	}
}
