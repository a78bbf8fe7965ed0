package codec

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
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
	if got := string(p.GetMetadata()[metaVersion]); got != version3 {
		t.Errorf("%s = %q, want %q", metaVersion, got, version3)
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

// sealV1 encrypts p as siteops did before version 2: the key ID alone as
// additional data and no version field, for the histories written then.
func sealV1(t *testing.T, c *AESGCM, p *commonpb.Payload) *commonpb.Payload {
	t.Helper()
	plain, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, c.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		t.Fatal(err)
	}
	return &commonpb.Payload{
		Metadata: map[string][]byte{encodingKey: []byte(Encoding), metaKeyID: []byte(c.keyID), metaCipher: []byte(cipherName)},
		Data:     c.aead.Seal(nonce, nonce, plain, []byte(c.keyID)),
	}
}

// sealV2 encrypts p as siteops did in version 2: the outer metadata as
// additional data, no namespace.
func sealV2(t *testing.T, c *AESGCM, p *commonpb.Payload) *commonpb.Payload {
	t.Helper()
	plain, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, c.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		t.Fatal(err)
	}
	return &commonpb.Payload{
		Metadata: map[string][]byte{encodingKey: []byte(Encoding), metaKeyID: []byte(c.keyID), metaCipher: []byte(cipherName), metaVersion: []byte(version2)},
		Data:     c.aead.Seal(nonce, nonce, plain, aadV2(c.keyID)),
	}
}

// TestVersions checks that payloads of every version decrypt, and that no
// field of a version-2 or version-3 payload's outer metadata can be
// changed or dropped: dropping the version does not make it a version-1
// payload, and dropping or changing the namespace does not move it to
// another namespace.
func TestVersions(t *testing.T) {
	c, _ := New(key, WithNamespace("prod"))
	inner, _ := converter.GetDefaultDataConverter().ToPayload(map[string]string{"title": "Bayside Dental"})
	enc, err := c.Encode([]*commonpb.Payload{inner})
	if err != nil {
		t.Fatal(err)
	}
	v3 := enc[0]
	v2 := sealV2(t, c, inner)
	v1 := sealV1(t, c, inner)
	unbound, _ := New(key)
	encUnbound, _ := unbound.Encode([]*commonpb.Payload{inner})
	edit := func(p *commonpb.Payload, f func(md map[string][]byte)) *commonpb.Payload {
		q := proto.Clone(p).(*commonpb.Payload)
		f(q.Metadata)
		return q
	}
	tests := []struct {
		name    string
		p       *commonpb.Payload
		wantErr string // empty: decrypts to inner
	}{
		{"version 3, this namespace", v3, ""},
		{"version 3, no namespace (a codec given none)", encUnbound[0], ""},
		{"version 2, written before version 3", v2, ""},
		{"version 1, written before version 2", v1, ""},
		{"version 3 without its version", edit(v3, func(md map[string][]byte) { delete(md, metaVersion) }), "does not decrypt"},
		{"version 3 claiming version 2", edit(v3, func(md map[string][]byte) { md[metaVersion] = []byte(version2) }), "does not decrypt"},
		{"version 3 without its namespace", edit(v3, func(md map[string][]byte) { delete(md, metaNamespace) }), "does not decrypt"},
		{"version 3 relabelled for this namespace", edit(mustEncodeFor(t, c, inner, "staging"), func(md map[string][]byte) { md[metaNamespace] = []byte("prod") }), "does not decrypt"},
		{"version 3 of another namespace", mustEncodeFor(t, c, inner, "staging"), `namespace "staging" is read in namespace "prod"`},
		{"version 2 without its version", edit(v2, func(md map[string][]byte) { delete(md, metaVersion) }), "does not decrypt"},
		{"version 1 claiming version 2", edit(v1, func(md map[string][]byte) { md[metaVersion] = []byte(version2) }), "does not decrypt"},
		{"an unknown version", edit(v3, func(md map[string][]byte) { md[metaVersion] = []byte("9") }), "newer siteops"},
		{"another cipher", edit(v3, func(md map[string][]byte) { md[metaCipher] = []byte("AES128-CBC") }), "cipher"},
		{"another key ID", edit(v3, func(md map[string][]byte) { md[metaKeyID] = []byte("00000000") }), "SITEOPS_PAYLOAD_KEY"},
		{"relabelled as plaintext", edit(v3, func(md map[string][]byte) { md[encodingKey] = []byte("json/plain") }), "tampered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.Decode([]*commonpb.Payload{tt.p})
			if tt.wantErr == "" {
				if err != nil || !proto.Equal(out[0], inner) {
					t.Fatalf("Decode = %v, %v; want the inner payload", out, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode error = %v, want one saying %q", err, tt.wantErr)
			}
		})
	}
}

func mustEncodeFor(t *testing.T, c *AESGCM, p *commonpb.Payload, ns string) *commonpb.Payload {
	t.Helper()
	out, err := c.encode([]*commonpb.Payload{p}, ns)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// TestNamespaceBinding checks the binding end to end through data
// converters: what a worker of one namespace writes, a worker of another
// namespace with the same key refuses, while a codec given no namespace
// reads both; the original payload's metadata comes back as it was.
func TestNamespaceBinding(t *testing.T) {
	prod, err := New(key, WithNamespace("prod"))
	if err != nil {
		t.Fatal(err)
	}
	staging, _ := New(key, WithNamespace("staging"))
	unbound, _ := New(key)
	p, err := prod.DataConverter().ToPayload(map[string]string{"reason": "incident"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.GetMetadata()[metaNamespace]); got != "prod" {
		t.Errorf("%s = %q, want prod", metaNamespace, got)
	}
	var back map[string]string
	if err := staging.DataConverter().FromPayload(p, &back); err == nil || !strings.Contains(err.Error(), "do not move between namespaces") {
		t.Errorf("prod's payload read in staging: %v, %v; want a refusal", back, err)
	}
	for name, c := range map[string]*AESGCM{"prod": prod, "no namespace": unbound} {
		out, err := c.Decode([]*commonpb.Payload{p})
		if err != nil || string(out[0].GetMetadata()[converter.MetadataEncoding]) != converter.MetadataEncodingJSON {
			t.Errorf("read by %s: %v, %v; want the json/plain payload", name, out, err)
		}
	}
	for _, bad := range []string{"", "a\x00b", "has space", strings.Repeat("n", 300)} {
		if _, err := New(key, WithNamespace(bad)); err == nil {
			t.Errorf("WithNamespace(%q) was accepted", bad)
		}
	}
}

// TestRequireEncrypted checks the option that refuses plaintext payloads,
// while encrypted ones of both versions still decode.
func TestRequireEncrypted(t *testing.T) {
	c, _ := New(key, RequireEncrypted())
	plain, _ := converter.GetDefaultDataConverter().ToPayload("plain")
	if _, err := c.Decode([]*commonpb.Payload{plain}); !errors.Is(err, ErrNotEncrypted) || !strings.Contains(err.Error(), "SITEOPS_PAYLOAD_KEY") {
		t.Errorf("Decode(plaintext) = %v, want ErrNotEncrypted naming SITEOPS_PAYLOAD_KEY", err)
	}
	enc, _ := c.Encode([]*commonpb.Payload{plain})
	if out, err := c.Decode([]*commonpb.Payload{enc[0], sealV1(t, c, plain)}); err != nil || !proto.Equal(out[0], plain) || !proto.Equal(out[1], plain) {
		t.Errorf("Decode(encrypted) = %v, %v", out, err)
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
