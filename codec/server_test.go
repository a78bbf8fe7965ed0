package codec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/siteops/siteops/internal/siteopstest"
)

const uiOrigin = "http://localhost:8233"

// newServer serves NewHandler(o) with the codec c on a loopback port,
// with the Hosts of that port (LocalHosts) unless o names some.
func newServer(t *testing.T, c *AESGCM, o HandlerOptions) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	if o.Hosts == nil {
		o.Hosts = LocalHosts(srv.Listener.Addr().String())
	}
	o.Codec = c
	h, err := NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// payloadsBody is a /decode request for one payload encrypted by c.
func payloadsBody(t *testing.T, c *AESGCM, v any) []byte {
	t.Helper()
	p, err := c.DataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, p))}})
	return body
}

func TestCodecServer(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}})
	srv := newServer(t, c, HandlerOptions{Origins: []string{uiOrigin}})
	p, _ := converter.GetDefaultDataConverter().ToPayload("hello")
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, p))}})
	enc := post(t, srv.URL+"/encode", "default", body)
	if strings.Contains(enc, "aGVsbG8") { // base64 of "hello" must not appear in the clear
		t.Fatalf("encode did not encrypt: %s", enc)
	}
	dec := post(t, srv.URL+"/decode", "default", []byte(enc))
	if !strings.Contains(dec, `ImhlbGxvIg==`) { // "\"hello\"" in base64
		t.Fatalf("decode = %s", dec)
	}
	// A plaintext payload is refused: no holder of the key wrote it, and
	// the Web UI then shows it as it is rather than as if decoded.
	if code, got := postStatus(t, srv.URL+"/decode", "default", body); code != http.StatusBadRequest || !strings.Contains(got, "not encrypted") || !strings.Contains(got, "--allow-plaintext") {
		t.Errorf("decode of a plaintext payload = %d %s; want 400 naming --allow-plaintext", code, got)
	}
	// With AllowPlaintext it comes back as it was sent: nothing is
	// revealed that the caller did not send.
	lax := newServer(t, c, HandlerOptions{AllowPlaintext: true})
	if got := post(t, lax.URL+"/decode", "default", body); !strings.Contains(got, `ImhlbGxvIg==`) {
		t.Errorf("decode of a plaintext payload with AllowPlaintext = %s", got)
	}
}

// TestCodecServerBindsToXNamespace checks that /encode binds payloads to
// the namespace the request names, /decode refuses them in another one,
// and a worker of that namespace reads what the CLI encoded through it.
func TestCodecServerBindsToXNamespace(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}})
	srv := newServer(t, c, HandlerOptions{})
	p, _ := converter.GetDefaultDataConverter().ToPayload("hello")
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, p))}})
	enc := post(t, srv.URL+"/encode", "prod", body)
	if code, got := postStatus(t, srv.URL+"/decode", "staging", []byte(enc)); code != http.StatusBadRequest || !strings.Contains(got, "do not move between namespaces") {
		t.Errorf("decode of prod's payload as staging = %d %s; want 400", code, got)
	}
	if got := post(t, srv.URL+"/decode", "prod", []byte(enc)); !strings.Contains(got, `ImhlbGxvIg==`) {
		t.Errorf("decode as prod = %s", got)
	}
	var in commonpb.Payloads
	if err := protojson.Unmarshal([]byte(enc), &in); err != nil {
		t.Fatal(err)
	}
	worker, _ := New(Options{Keys: [][]byte{key}, Namespace: "prod"})
	var s string
	if err := worker.DataConverter().FromPayload(in.GetPayloads()[0], &s); err != nil || s != "hello" {
		t.Errorf("prod's worker reads %q, %v", s, err)
	}
	if code, got := postStatus(t, srv.URL+"/encode", "bad\tname", body); code != http.StatusBadRequest {
		t.Errorf("an X-Namespace that is no namespace name = %d %s; want 400", code, got)
	}
}

func post(t *testing.T, url, namespace string, body []byte) string {
	t.Helper()
	code, b := postStatus(t, url, namespace, body)
	if code != 200 {
		t.Fatalf("%s: %d %s", url, code, b)
	}
	return b
}

// postStatus posts body as the Web UI does, with X-Namespace, and returns
// the status and the body of the answer.
func postStatus(t *testing.T, url, namespace string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", namespace)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return resp.StatusCode, string(b)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", got)
	}
	return resp.StatusCode, string(b)
}

// request is one request to the codec server in a table test.
type request struct {
	name, method, path, origin string
	host                       string // empty: the server's own
	contentType                string // for POST; empty: application/json, "-": none
	auth                       string
	body                       []byte
	chunked                    bool // no Content-Length: the body's size is learnt by reading it
}

func (rq request) do(t *testing.T, srv *httptest.Server) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader = bytes.NewReader(rq.body)
	if rq.chunked {
		body = io.MultiReader(body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), rq.method, srv.URL+rq.path, body)
	if rq.host != "" {
		req.Host = rq.host
	}
	if rq.origin != "" {
		req.Header.Set("Origin", rq.origin)
	}
	if rq.auth != "" {
		req.Header.Set("Authorization", rq.auth)
	}
	if rq.method == http.MethodOptions {
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	} else {
		switch rq.contentType {
		case "":
			req.Header.Set("Content-Type", "application/json")
		case "-":
		default:
			req.Header.Set("Content-Type", rq.contentType)
		}
		req.Header.Set("X-Namespace", "default")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, b
}

// TestCodecServerRefusals checks what a browser and any other client see:
// the Web UI's origin gets its preflight answered with the headers the UI
// sends, and every request the server must not serve is refused before
// anything is decoded — a foreign Host (DNS rebinding, even with the UI's
// Origin), a foreign Origin, a body that is not JSON, a body over the cap —
// and no answer allows credentials.
func TestCodecServerRefusals(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}})
	srv := newServer(t, c, HandlerOptions{Origins: []string{uiOrigin, "HTTP://127.0.0.1:8233/"}})
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	body := payloadsBody(t, c, "hello")
	big := bytes.Repeat([]byte(" "), MaxRequestBytes+1)
	tests := []struct {
		request
		wantStatus      int
		wantAllowOrigin string
	}{
		{request{name: "preflight from the UI", method: http.MethodOptions, path: "/decode", origin: uiOrigin}, http.StatusNoContent, uiOrigin},
		{request{name: "preflight from the UI by address", method: http.MethodOptions, path: "/encode", origin: "http://127.0.0.1:8233"}, http.StatusNoContent, "http://127.0.0.1:8233"},
		{request{name: "decode from the UI", method: http.MethodPost, path: "/decode", origin: uiOrigin, body: body}, http.StatusOK, uiOrigin},
		{request{name: "decode without an origin (CLI)", method: http.MethodPost, path: "/decode", body: body}, http.StatusOK, ""},
		{request{name: "decode as localhost", method: http.MethodPost, path: "/decode", host: "LOCALHOST:" + port, body: body}, http.StatusOK, ""},
		{request{name: "decode with a charset", method: http.MethodPost, path: "/decode", contentType: "application/json; charset=utf-8", body: body}, http.StatusOK, ""},
		{request{name: "DNS rebinding: a foreign Host with the UI's origin", method: http.MethodPost, path: "/decode", host: "evil.example:" + port, origin: uiOrigin, body: body}, http.StatusForbidden, ""},
		{request{name: "DNS rebinding preflight", method: http.MethodOptions, path: "/decode", host: "evil.example:" + port, origin: uiOrigin}, http.StatusForbidden, ""},
		{request{name: "a foreign Host without a port", method: http.MethodPost, path: "/decode", host: "evil.example", body: body}, http.StatusForbidden, ""},
		{request{name: "localhost on another port", method: http.MethodPost, path: "/decode", host: "localhost:1", body: body}, http.StatusForbidden, ""},
		{request{name: "preflight from another origin", method: http.MethodOptions, path: "/decode", origin: "http://evil.example"}, http.StatusForbidden, ""},
		{request{name: "decode from another origin", method: http.MethodPost, path: "/decode", origin: "http://evil.example", body: body}, http.StatusForbidden, ""},
		{request{name: "decode from another port", method: http.MethodPost, path: "/decode", origin: "http://localhost:8234", body: body}, http.StatusForbidden, ""},
		{request{name: "decode from a sandboxed page", method: http.MethodPost, path: "/decode", origin: "null", body: body}, http.StatusForbidden, ""},
		{request{name: "text/plain (a simple request)", method: http.MethodPost, path: "/decode", contentType: "text/plain", body: body}, http.StatusUnsupportedMediaType, ""},
		{request{name: "text/plain from the UI", method: http.MethodPost, path: "/decode", origin: uiOrigin, contentType: "text/plain;charset=UTF-8", body: body}, http.StatusUnsupportedMediaType, uiOrigin},
		{request{name: "a form", method: http.MethodPost, path: "/encode", contentType: "application/x-www-form-urlencoded", body: body}, http.StatusUnsupportedMediaType, ""},
		{request{name: "no Content-Type", method: http.MethodPost, path: "/decode", contentType: "-", body: body}, http.StatusUnsupportedMediaType, ""},
		{request{name: "over the size cap", method: http.MethodPost, path: "/decode", body: big}, http.StatusRequestEntityTooLarge, ""},
		{request{name: "over the size cap, chunked", method: http.MethodPost, path: "/decode", body: big, chunked: true}, http.StatusRequestEntityTooLarge, ""},
		{request{name: "not protojson", method: http.MethodPost, path: "/decode", body: []byte(`{"payloads": 1}`)}, http.StatusBadRequest, ""},
		{request{name: "GET", method: http.MethodGet, path: "/decode"}, http.StatusMethodNotAllowed, ""},
		{request{name: "another path", method: http.MethodPost, path: "/encrypt", body: body}, http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := tt.do(t, srv)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.wantStatus, b)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tt.wantAllowOrigin {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, tt.wantAllowOrigin)
			}
			if got, ok := resp.Header["Access-Control-Allow-Credentials"]; ok {
				t.Errorf("Access-Control-Allow-Credentials = %q, want none", got)
			}
			if tt.wantStatus != http.StatusOK && strings.Contains(string(b), "metadata") {
				t.Errorf("a refused request was answered with payloads: %s", b)
			}
			if tt.method == http.MethodOptions && tt.wantStatus == http.StatusNoContent {
				allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
				for _, h := range []string{"content-type", "x-namespace", "authorization"} {
					if !strings.Contains(allowed, h) {
						t.Errorf("Access-Control-Allow-Headers = %q lacks %s", allowed, h)
					}
				}
				if !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
					t.Errorf("Access-Control-Allow-Methods = %q lacks POST", resp.Header.Get("Access-Control-Allow-Methods"))
				}
			}
			if tt.wantStatus == http.StatusOK && tt.path == "/decode" && !strings.Contains(string(b), "ImhlbGxvIg==") {
				t.Errorf("decode = %s", b)
			}
		})
	}
}

// TestCodecServerToken checks the bearer token: when set, /encode and
// /decode need it exactly, whatever the Host and Origin; preflights, which
// browsers send without it, do not.
func TestCodecServerToken(t *testing.T) {
	const token = "s3cret-codec-token-0123456789"
	c, _ := New(Options{Keys: [][]byte{key}})
	srv := newServer(t, c, HandlerOptions{Origins: []string{uiOrigin}, Token: token})
	body := payloadsBody(t, c, "hello")
	tests := []struct {
		request
		want int
	}{
		{request{name: "the token", method: http.MethodPost, path: "/decode", auth: "Bearer " + token, body: body}, http.StatusOK},
		{request{name: "the token, scheme in lower case", method: http.MethodPost, path: "/encode", auth: "bearer " + token, body: body}, http.StatusOK},
		{request{name: "the token from the UI", method: http.MethodPost, path: "/decode", origin: uiOrigin, auth: "Bearer " + token, body: body}, http.StatusOK},
		{request{name: "no token", method: http.MethodPost, path: "/decode", body: body}, http.StatusUnauthorized},
		{request{name: "no token from the UI", method: http.MethodPost, path: "/decode", origin: uiOrigin, body: body}, http.StatusUnauthorized},
		{request{name: "a wrong token", method: http.MethodPost, path: "/decode", auth: "Bearer " + token + "x", body: body}, http.StatusUnauthorized},
		{request{name: "a prefix of the token", method: http.MethodPost, path: "/decode", auth: "Bearer " + token[:len(token)-1], body: body}, http.StatusUnauthorized},
		{request{name: "the token without its scheme", method: http.MethodPost, path: "/decode", auth: token, body: body}, http.StatusUnauthorized},
		{request{name: "the token as Basic", method: http.MethodPost, path: "/decode", auth: "Basic " + token, body: body}, http.StatusUnauthorized},
		{request{name: "no token, text/plain", method: http.MethodPost, path: "/decode", contentType: "text/plain", body: body}, http.StatusUnauthorized},
		{request{name: "the token, text/plain", method: http.MethodPost, path: "/decode", auth: "Bearer " + token, contentType: "text/plain", body: body}, http.StatusUnsupportedMediaType},
		{request{name: "the token from a foreign Host", method: http.MethodPost, path: "/decode", host: "evil.example", auth: "Bearer " + token, body: body}, http.StatusForbidden},
		{request{name: "preflight from the UI", method: http.MethodOptions, path: "/decode", origin: uiOrigin}, http.StatusNoContent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := tt.do(t, srv)
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.want, b)
			}
			if tt.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", resp.Header.Get("WWW-Authenticate"))
			}
			if _, ok := resp.Header["Access-Control-Allow-Credentials"]; ok {
				t.Error("the answer allows credentials")
			}
			if strings.Contains(string(b), token) {
				t.Errorf("the answer shows the token: %s", b)
			}
		})
	}
	if _, err := NewHandler(HandlerOptions{Codec: c, Hosts: []string{"localhost"}, Token: "short"}); err == nil {
		t.Error("a token of 5 characters was accepted")
	}
	if _, err := NewHandler(HandlerOptions{Codec: c}); err == nil {
		t.Error("a server without Hosts was built")
	}
	if _, err := NewHandler(HandlerOptions{Hosts: []string{"localhost"}}); err == nil {
		t.Error("a server without a codec was built")
	}
}

func TestLocalHostsAndHostMatching(t *testing.T) {
	for addr, want := range map[string][]string{
		"127.0.0.1:8081": {"localhost:8081", "127.0.0.1:8081", "[::1]:8081"},
		"[::]:8081":      {"localhost:8081", "127.0.0.1:8081", "[::1]:8081"},
		"0.0.0.0:8081":   {"localhost:8081", "127.0.0.1:8081", "[::1]:8081"},
		"10.0.0.5:8081":  {"localhost:8081", "127.0.0.1:8081", "[::1]:8081", "10.0.0.5:8081"},
		"Codec.Lan:8081": {"localhost:8081", "127.0.0.1:8081", "[::1]:8081", "codec.lan:8081"},
		"no port":        nil,
	} {
		if got := LocalHosts(addr); !slices.Equal(got, want) {
			t.Errorf("LocalHosts(%q) = %q, want %q", addr, got, want)
		}
	}
	h, err := newHandler(HandlerOptions{Hosts: []string{"LOCALHOST:8081", "codec.example.com", "[::1]:8081"}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"localhost:8081": true, "LocalHost:8081": true, "[::1]:8081": true,
		"codec.example.com": true, "codec.example.com:443": true,
		"localhost": false, "localhost:8082": false, "evil.example": false, "evil.example:8081": false,
		"codec.example.com.evil.example": false, "": false,
	} {
		if got := h.allowedHost(host); got != want {
			t.Errorf("Host %q allowed = %v, want %v", host, got, want)
		}
	}
}

// TestCodecServerLogsRefusals checks that refusals are logged with what
// was refused and the flag that would allow it, so that a "decode failed"
// in the Web UI can be traced, and that the token never reaches the log.
func TestCodecServerLogsRefusals(t *testing.T) {
	const token = "s3cret-codec-token-0123456789"
	c, _ := New(Options{Keys: [][]byte{key}})
	var logs bytes.Buffer
	srv := newServer(t, c, HandlerOptions{Origins: []string{uiOrigin}, Token: token, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, rq := range []request{
		{method: http.MethodOptions, path: "/decode", origin: "http://localhost:9999"},
		{method: http.MethodPost, path: "/decode", host: "rebound.example:1234", body: []byte("{}")},
		{method: http.MethodPost, path: "/decode", auth: "Bearer wrong-" + token, body: []byte("{}")},
		{method: http.MethodPost, path: "/decode", auth: "Bearer " + token, contentType: "text/plain", body: []byte("{}")},
	} {
		rq.do(t, srv)
	}
	for _, want := range []string{"origin=http://localhost:9999", "--web-ui-origin", "host=rebound.example:1234", "--allowed-host",
		"bearer token", "status=401", "content_type=text/plain", "status=415"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log shows the token:\n%s", logs.String())
	}
}

// TestCodecServerRequiresXNamespace checks that /encode and /decode are
// refused without X-Namespace, naming the header: without it /decode would
// open every namespace's payloads. A codec bound to a namespace serves
// that one only.
func TestCodecServerRequiresXNamespace(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}})
	srv := newServer(t, c, HandlerOptions{Origins: []string{uiOrigin}})
	body := payloadsBody(t, c, "hello")
	for _, path := range []string{"/decode", "/encode"} {
		for _, origin := range []string{"", uiOrigin} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "X-Namespace") || strings.Contains(string(b), "metadata") {
				t.Errorf("%s without X-Namespace (Origin %q) = %d %s; want 400 naming X-Namespace", path, origin, resp.StatusCode, b)
			}
		}
		if code, got := postStatus(t, srv.URL+path, "default", body); code != http.StatusOK {
			t.Errorf("%s with X-Namespace = %d %s; want 200", path, code, got)
		}
	}

	prod, _ := New(Options{Keys: [][]byte{key}, Namespace: "prod"})
	bound := newServer(t, prod, HandlerOptions{})
	prodBody := payloadsBody(t, prod, "hello")
	if code, got := postStatus(t, bound.URL+"/decode", "staging", prodBody); code != http.StatusBadRequest || !strings.Contains(got, "serves namespace prod only") {
		t.Errorf("a server for prod asked for staging = %d %s; want 400 naming prod", code, got)
	}
	if got := post(t, bound.URL+"/decode", "prod", prodBody); !strings.Contains(got, "ImhlbGxvIg==") {
		t.Errorf("a server for prod asked for prod = %s", got)
	}
}

// TestCodecServerKeyRing checks that the codec server decodes with every
// key of its ring and encodes with the first.
func TestCodecServerKeyRing(t *testing.T) {
	keyB := bytes.Repeat([]byte("b"), 32)
	old, _ := New(Options{Keys: [][]byte{key}})
	ring, err := New(Options{Keys: [][]byte{keyB, key}})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, ring, HandlerOptions{})
	if got := post(t, srv.URL+"/decode", "default", payloadsBody(t, old, "hello")); !strings.Contains(got, "ImhlbGxvIg==") {
		t.Errorf("decode of a payload under the old key = %s", got)
	}
	p, _ := converter.GetDefaultDataConverter().ToPayload("hello")
	body, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, p))}})
	var enc commonpb.Payloads
	if err := protojson.Unmarshal([]byte(post(t, srv.URL+"/encode", "default", body)), &enc); err != nil {
		t.Fatal(err)
	}
	if got := string(enc.GetPayloads()[0].GetMetadata()[metaKeyID]); got != KeyID(keyB) {
		t.Errorf("/encode wrote under key %s, want the ring's first, %s", got, KeyID(keyB))
	}
}

// slowUpload opens a connection to srv and sends a /decode request whose
// headers are complete but whose body of 1000 declared bytes has sent one:
// an upload whose bytes trickle in. The connection closes with the test.
func slowUpload(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /decode HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Namespace: default\r\nContent-Length: 1000\r\n\r\n{",
		srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// countRequests counts the requests h has begun serving.
func countRequests(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}

// TestCodecServerSlowUploadsDoNotStallDecodes checks that uploads whose
// bytes trickle in, more of them than there are places to decrypt, do not
// hold a decode of the Web UI up: it is answered within 1 s while they are
// all still in flight.
func TestCodecServerSlowUploadsDoNotStallDecodes(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}})
	h, err := NewHandler(HandlerOptions{Codec: c, Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	var begun atomic.Int64
	srv := httptest.NewUnstartedServer(countRequests(h, &begun))
	srv.Config = NewServer(srv.Config.Handler)
	srv.Start()
	t.Cleanup(srv.Close)
	const slow = MaxConcurrent + 2
	for range slow {
		slowUpload(t, srv)
	}
	siteopstest.EventuallyNil(t, 10*time.Second, fmt.Sprintf("the %d slow uploads to reach the handler", slow), func() error {
		if n := begun.Load(); n != slow {
			return fmt.Errorf("%d reached it", n)
		}
		return nil
	})

	within := siteopstest.Bound(time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/decode", bytes.NewReader(payloadsBody(t, c, "hello")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	began := time.Now()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("a decode beside %d slow uploads: %v after %s; want an answer within %s", slow, err, time.Since(began).Round(time.Millisecond), within)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "ImhlbGxvIg==") {
		t.Fatalf("a decode beside %d slow uploads = %d %s; want 200 and the payload", slow, resp.StatusCode, b)
	}
}

// TestCodecServerBoundedWaits checks what a request that finds no room
// gets after a short, bounded wait: 503 with Retry-After, when every place
// to decrypt is taken and when the bytes set aside for bodies are; and that
// an upload slower than the body's deadline is cut with 408.
func TestCodecServerBoundedWaits(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}})
	body := payloadsBody(t, c, "hello")
	serve := func(t *testing.T, tune func(h *handler)) *httptest.Server {
		t.Helper()
		h, err := newHandler(HandlerOptions{Hosts: []string{"127.0.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		h.slotWait, h.bodyTimeout = 100*time.Millisecond, 200*time.Millisecond
		tune(h)
		srv := httptest.NewUnstartedServer(h.routes(c))
		srv.Config = NewServer(srv.Config.Handler)
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	decode := func(t *testing.T, srv *httptest.Server) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp, string(b)
	}
	t.Run("every place to decrypt taken", func(t *testing.T) {
		srv := serve(t, func(h *handler) {
			for range MaxConcurrent {
				h.slots <- struct{}{}
			}
		})
		resp, b := decode(t, srv)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(b, "busy") {
			t.Errorf("decode = %d (Retry-After %q) %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	})
	t.Run("the bytes for bodies taken", func(t *testing.T) {
		srv := serve(t, func(h *handler) {
			h.bodies = newBudget(int64(len(body)))
			if _, ok := h.bodies.tryTake(int64(len(body))); !ok {
				t.Fatal("the budget could not be taken")
			}
		})
		resp, b := decode(t, srv)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(b, "busy") {
			t.Errorf("decode = %d (Retry-After %q) %s; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	})
	t.Run("room again once a request is answered", func(t *testing.T) {
		var h0 *handler
		srv := serve(t, func(h *handler) { h.bodies, h0 = newBudget(int64(len(body))), h })
		for i := range 3 {
			if resp, b := decode(t, srv); resp.StatusCode != http.StatusOK {
				t.Fatalf("decode %d = %d %s; want 200 (the bytes of the one before given back)", i+1, resp.StatusCode, b)
			}
		}
		if _, ok := h0.bodies.tryTake(int64(len(body))); !ok {
			t.Errorf("the budget does not hold all its bytes after the requests were answered")
		}
	})
	t.Run("a body slower than its deadline", func(t *testing.T) {
		srv := serve(t, func(*handler) {})
		conn := slowUpload(t, srv)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("the slow upload got no answer: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within") {
			t.Errorf("the slow upload = %d %s; want 408", resp.StatusCode, b)
		}
	})
}
