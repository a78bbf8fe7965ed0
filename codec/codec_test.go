package codec

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestRoundTripAndTamper(t *testing.T) {
	c, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	dc := c.DataConverter()
	p, err := dc.ToPayload(map[string]string{"reason": "widget on a phishing page"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.GetData()), "phishing") || string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
		t.Fatalf("payload not encrypted: %v", p)
	}
	var back map[string]string
	if err := dc.FromPayload(p, &back); err != nil || back["reason"] != "widget on a phishing page" {
		t.Fatalf("round trip = %v, %v", back, err)
	}
	p.Data[len(p.Data)-1] ^= 1
	if err := dc.FromPayload(p, &back); err == nil {
		t.Fatal("a tampered payload decoded")
	}
	other, _ := New(bytes.Repeat([]byte("x"), 32))
	q, _ := dc.ToPayload("x")
	if _, err := other.Decode([]*commonpb.Payload{q}); err == nil || !strings.Contains(err.Error(), "SITEOPS_PAYLOAD_KEY") {
		t.Errorf("another key: %v", err)
	}
	// Payloads written without the codec pass through.
	plain, _ := converter.GetDefaultDataConverter().ToPayload("plain")
	if out, err := c.Decode([]*commonpb.Payload{plain}); err != nil || out[0] != plain {
		t.Errorf("plain payload: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	if _, err := ParseKey("c2hvcnQ="); err == nil {
		t.Error("a short key was accepted")
	}
	if k, err := ParseKey("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="); err != nil || !bytes.Equal(k, key) {
		t.Errorf("ParseKey = %v", err)
	}
}

func TestCodecServer(t *testing.T) {
	c, _ := New(key)
	srv := httptest.NewServer(Handler(c, []string{"http://localhost:8233"}))
	defer srv.Close()
	p, _ := converter.GetDefaultDataConverter().ToPayload("hello")
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, p))}})
	enc := post(t, srv.URL+"/encode", body)
	if strings.Contains(enc, "aGVsbG8") { // base64 of "hello" must not appear in the clear
		t.Fatalf("encode did not encrypt: %s", enc)
	}
	dec := post(t, srv.URL+"/decode", []byte(enc))
	if !strings.Contains(dec, `ImhlbGxvIg==`) { // "\"hello\"" in base64
		t.Fatalf("decode = %s", dec)
	}
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", "http://localhost:8233")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:8233" {
		t.Errorf("CORS preflight headers = %v", resp.Header)
	}
}

func post(t *testing.T, url string, body []byte) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
