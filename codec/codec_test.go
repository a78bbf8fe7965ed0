package codec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestRoundTripAndTamper(t *testing.T) {
	c, err := New(Options{Keys: [][]byte{key}})
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
	other, _ := New(Options{Keys: [][]byte{bytes.Repeat([]byte("x"), 32)}})
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
	c, _ := New(Options{Keys: [][]byte{key}, Namespace: "prod"})
	inner, _ := converter.GetDefaultDataConverter().ToPayload(map[string]string{"title": "Bayside Dental"})
	enc, err := c.Encode([]*commonpb.Payload{inner})
	if err != nil {
		t.Fatal(err)
	}
	v3 := enc[0]
	v2 := sealV2(t, c, inner)
	v1 := sealV1(t, c, inner)
	unbound, _ := New(Options{Keys: [][]byte{key}})
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
	prod, err := New(Options{Keys: [][]byte{key}, Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	staging, _ := New(Options{Keys: [][]byte{key}, Namespace: "staging"})
	unbound, _ := New(Options{Keys: [][]byte{key}})
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
	for _, bad := range []string{"a\x00b", "has space", "-lead", strings.Repeat("n", 300)} {
		if _, err := New(Options{Keys: [][]byte{key}, Namespace: bad}); err == nil || !strings.Contains(err.Error(), "is not a Temporal namespace name") {
			t.Errorf("Namespace %q: %v; want it refused as not a namespace name", bad, err)
		}
	}
}

// TestRequireEncrypted checks the setting that refuses plaintext payloads,
// while encrypted ones of both versions still decode.
func TestRequireEncrypted(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}, RequireEncrypted: true})
	plain, _ := converter.GetDefaultDataConverter().ToPayload("plain")
	if _, err := c.Decode([]*commonpb.Payload{plain}); !errors.Is(err, ErrNotEncrypted) || !strings.Contains(err.Error(), "SITEOPS_PAYLOAD_KEY") {
		t.Errorf("Decode(plaintext) = %v, want ErrNotEncrypted naming SITEOPS_PAYLOAD_KEY", err)
	}
	enc, _ := c.Encode([]*commonpb.Payload{plain})
	if out, err := c.Decode([]*commonpb.Payload{enc[0], sealV1(t, c, plain)}); err != nil || !proto.Equal(out[0], plain) || !proto.Equal(out[1], plain) {
		t.Errorf("Decode(encrypted) = %v, %v", out, err)
	}
}

func TestParseKeyRing(t *testing.T) {
	keyA := base64.StdEncoding.EncodeToString(key)
	keyB := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("b"), 32))
	tests := []struct {
		name, value string
		want        int    // keys
		wantErr     string // empty: no error
	}{
		{name: "one key", value: keyA, want: 1},
		{name: "one key with a newline", value: keyA + "\n", want: 1},
		{name: "a ring", value: keyB + "," + keyA, want: 2},
		{name: "a ring with spaces", value: keyB + " , " + keyA + " ", want: 2},
		{name: "a short key", value: "c2hvcnQ=", wantErr: "32 random bytes in base64"},
		{name: "a short key in a ring", value: keyB + ",c2hvcnQ=", wantErr: "key 2 is not 32 random bytes"},
		{name: "an empty entry", value: keyB + ",", wantErr: "key 2 is not"},
		{name: "empty", value: "", wantErr: "32 random bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ParseKeyRing(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseKeyRing = %d keys, %v; want an error saying %q", len(keys), err, tt.wantErr)
				}
				if strings.Contains(err.Error(), keyB) || strings.Contains(err.Error(), keyA) {
					t.Errorf("the error shows a key: %v", err)
				}
				return
			}
			if err != nil || len(keys) != tt.want {
				t.Fatalf("ParseKeyRing = %d keys, %v; want %d", len(keys), err, tt.want)
			}
		})
	}
	if keys, err := ParseKeyRing(keyA); err != nil || !bytes.Equal(keys[0], key) {
		t.Errorf("ParseKeyRing(one key) = %q, %v; want the key", keys, err)
	}
}

// TestKeyRingRotation checks a rotation from key A to key B: with the ring
// "B,A" payloads written under A (in every format) still decode, and new
// ones are written under B; with "B" alone, A's payloads fail with an
// error that names A's key ID and shows no key. A ring with one key is
// the codec of one key.
func TestKeyRingRotation(t *testing.T) {
	keyA, keyB := key, bytes.Repeat([]byte("b"), 32)
	onlyA, err := New(Options{Keys: [][]byte{keyA}, Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	inner, _ := converter.GetDefaultDataConverter().ToPayload(map[string]string{"title": "Bayside Dental"})
	underA := map[string]*commonpb.Payload{"version 1": sealV1(t, onlyA, inner), "version 2": sealV2(t, onlyA, inner)}
	enc, err := onlyA.Encode([]*commonpb.Payload{inner})
	if err != nil {
		t.Fatal(err)
	}
	underA["version 3"] = enc[0]

	ring, err := ParseKeyRing(base64.StdEncoding.EncodeToString(keyB) + "," + base64.StdEncoding.EncodeToString(keyA))
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := New(Options{Keys: ring, Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rotated.KeyIDs(), []string{KeyID(keyB), KeyID(keyA)}; !slices.Equal(got, want) {
		t.Errorf("KeyIDs = %q, want %q (B encrypts)", got, want)
	}
	for name, p := range underA {
		out, err := rotated.Decode([]*commonpb.Payload{p})
		if err != nil || !proto.Equal(out[0], inner) {
			t.Errorf("A's %s payload read with the ring B,A = %v, %v; want the inner payload", name, out, err)
		}
	}
	enc, err = rotated.Encode([]*commonpb.Payload{inner})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(enc[0].GetMetadata()[metaKeyID]); got != KeyID(keyB) {
		t.Errorf("a new payload is written under key %s, want B's %s", got, KeyID(keyB))
	}
	if _, err := onlyA.Decode(enc); err == nil || !strings.Contains(err.Error(), KeyID(keyB)) {
		t.Errorf("B's payload read by a process holding A alone: %v; want an error naming key %s", err, KeyID(keyB))
	}

	onlyB, err := New(Options{Keys: [][]byte{keyB}, Namespace: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := onlyB.Decode(enc); err != nil || !proto.Equal(out[0], inner) {
		t.Errorf("B's payload read with the ring B = %v, %v", out, err)
	}
	for name, p := range underA {
		_, err := onlyB.Decode([]*commonpb.Payload{p})
		if err == nil || !strings.Contains(err.Error(), KeyID(keyA)) || !strings.Contains(err.Error(), "SITEOPS_PAYLOAD_KEY") {
			t.Fatalf("A's %s payload read with the ring B = %v; want an error naming the missing key %s and SITEOPS_PAYLOAD_KEY", name, err, KeyID(keyA))
		}
		for _, secret := range []string{string(keyA), string(keyB), base64.StdEncoding.EncodeToString(keyA), base64.StdEncoding.EncodeToString(keyB)} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows a key: %v", err)
			}
		}
	}

	if _, err := New(Options{Keys: [][]byte{keyB, keyA, keyB}}); err == nil || !strings.Contains(err.Error(), "key 3") {
		t.Errorf("a ring holding B twice: %v, want a refusal naming key 3", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("an empty ring was accepted")
	}
	if _, err := New(Options{Keys: [][]byte{keyB, []byte("short")}}); err == nil || !strings.Contains(err.Error(), "key 2") {
		t.Errorf("a ring with a short key: %v, want a refusal naming key 2", err)
	}
}
