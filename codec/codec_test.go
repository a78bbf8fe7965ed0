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
	if got := string(p.GetMetadata()[metaVersion]); got != version2 {
		t.Errorf("%s = %q, want %q", metaVersion, got, version2)
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

// TestVersions checks that payloads of both versions decrypt, and that no
// field of a version-2 payload's outer metadata can be changed or dropped:
// dropping the version does not make it a version-1 payload.
func TestVersions(t *testing.T) {
	c, _ := New(key)
	inner, _ := converter.GetDefaultDataConverter().ToPayload(map[string]string{"title": "Bayside Dental"})
	enc, err := c.Encode([]*commonpb.Payload{inner})
	if err != nil {
		t.Fatal(err)
	}
	v2 := enc[0]
	v1 := sealV1(t, c, inner)
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
		{"version 2", v2, ""},
		{"version 1, written before version 2", v1, ""},
		{"version 2 without its version", edit(v2, func(md map[string][]byte) { delete(md, metaVersion) }), "does not decrypt"},
		{"version 1 claiming version 2", edit(v1, func(md map[string][]byte) { md[metaVersion] = []byte(version2) }), "does not decrypt"},
		{"an unknown version", edit(v2, func(md map[string][]byte) { md[metaVersion] = []byte("9") }), "newer siteops"},
		{"another cipher", edit(v2, func(md map[string][]byte) { md[metaCipher] = []byte("AES128-CBC") }), "cipher"},
		{"another key ID", edit(v2, func(md map[string][]byte) { md[metaKeyID] = []byte("00000000") }), "SITEOPS_PAYLOAD_KEY"},
		{"relabelled as plaintext", edit(v2, func(md map[string][]byte) { md[encodingKey] = []byte("json/plain") }), "tampered"},
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
