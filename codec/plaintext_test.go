package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// answer stands for a type that crosses the Nexus boundary in plaintext;
// secret for every other one.
type (
	answer struct {
		SiteID string `json:"site_id"`
	}
	secret struct {
		Reason string `json:"reason"`
	}
)

func TestPlaintextTypesAreAuthenticatedNotEncrypted(t *testing.T) {
	c, err := New(Options{Keys: [][]byte{key}, Namespace: "prod", Plaintext: []any{answer{}}})
	if err != nil {
		t.Fatal(err)
	}
	dc := c.DataConverter()
	for name, v := range map[string]any{"a value": answer{SiteID: "site_1"}, "a pointer": &answer{SiteID: "site_1"}} {
		t.Run(name, func(t *testing.T) {
			p, err := dc.ToPayload(v)
			if err != nil {
				t.Fatal(err)
			}
			md := p.GetMetadata()
			if string(p.GetData()) != `{"site_id":"site_1"}` || string(md[converter.MetadataEncoding]) != converter.MetadataEncodingJSON {
				t.Errorf("payload %s (%s); want the JSON in the clear, json/plain", p.GetData(), md[converter.MetadataEncoding])
			}
			if string(md[metaAuthKeyID]) != c.KeyID() || string(md[metaAuthNamespace]) != "prod" || len(md[metaAuthTag]) != 32 {
				t.Errorf("metadata %v; want the authentication under key %s for prod", md, c.KeyID())
			}
			// A release that knows only encryption reads it as plaintext:
			// none of the encryption's metadata, which it would call
			// tampering under another encoding.
			for _, k := range []string{metaKeyID, metaVersion, metaNamespace, metaCipher, metaPlaintext} {
				if _, ok := md[k]; ok {
					t.Errorf("metadata has %s", k)
				}
			}
			var back answer
			if err := dc.FromPayload(p, &back); err != nil || back.SiteID != "site_1" {
				t.Errorf("read back with the key: %+v, %v", back, err)
			}
			var nokey answer
			if err := converter.GetDefaultDataConverter().FromPayload(p, &nokey); err != nil || nokey.SiteID != "site_1" {
				t.Errorf("read without the key: %+v, %v", nokey, err)
			}
		})
	}
	// Every other type is encrypted, also beside an answer.
	ps, err := dc.ToPayloads(secret{Reason: "phishing"}, answer{SiteID: "site_2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.GetPayloads(); string(got[0].GetMetadata()[converter.MetadataEncoding]) != Encoding || strings.Contains(string(got[0].GetData()), "phishing") ||
		string(got[1].GetData()) != `{"site_id":"site_2"}` {
		t.Errorf("payloads %v; want the secret encrypted and the answer in the clear", got)
	}
	var s secret
	var a answer
	if err := dc.FromPayloads(ps, &s, &a); err != nil || s.Reason != "phishing" || a.SiteID != "site_2" {
		t.Errorf("read back: %+v %+v %v", s, a, err)
	}
	// The SDK gives the converter a serialization context, comparing
	// what it wraps (its transfer-aware wrapper, internal since SDK
	// v1.51.0, hands the context to the converter it wraps); the answers
	// stay plaintext through it.
	wf := converter.WithDataConverterSerializationContext(dc, converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "w"})
	if p, err := wf.ToPayload(answer{SiteID: "site_3"}); err != nil || string(p.GetData()) != `{"site_id":"site_3"}` {
		t.Errorf("with a serialization context: %v, %v", p, err)
	}
}

func TestPlaintextRefusesForgeries(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}, Namespace: "prod", Plaintext: []any{answer{}}})
	good, err := c.DataConverter().ToPayload(answer{SiteID: "site_1"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(Options{Keys: [][]byte{bytes.Repeat([]byte("o"), 32)}, Plaintext: []any{answer{}}})
	byOther, _ := other.DataConverter().ToPayload(answer{SiteID: "site_1"})
	for _, tt := range []struct {
		name   string
		change func(p *commonpb.Payload) *commonpb.Payload
		want   string
	}{
		{"the data changed", func(p *commonpb.Payload) *commonpb.Payload { p.Data = []byte(`{"site_id":"site_9"}`); return p }, "tampered"},
		{"metadata added", func(p *commonpb.Payload) *commonpb.Payload { p.Metadata["messageType"] = []byte("x"); return p }, "tampered"},
		{"the encoding changed", func(p *commonpb.Payload) *commonpb.Payload {
			p.Metadata[converter.MetadataEncoding] = []byte("binary/plain")
			return p
		}, "tampered"},
		{"the namespace dropped", func(p *commonpb.Payload) *commonpb.Payload { delete(p.Metadata, metaAuthNamespace); return p }, "tampered"},
		{"the tag dropped", func(p *commonpb.Payload) *commonpb.Payload { delete(p.Metadata, metaAuthTag); return p }, "tampered"},
		{"an unknown version", func(p *commonpb.Payload) *commonpb.Payload { p.Metadata[metaAuthVersion] = []byte("9"); return p }, "upgrade"},
		{"another namespace", func(p *commonpb.Payload) *commonpb.Payload {
			q, _ := New(Options{Keys: [][]byte{key}, Namespace: "staging", Plaintext: []any{answer{}}})
			r, _ := q.DataConverter().ToPayload(answer{SiteID: "site_1"})
			return r
		}, "do not move between namespaces"},
		{"another key", func(*commonpb.Payload) *commonpb.Payload { return byOther }, "does not hold"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.change(proto.CloneOf(good))
			_, err := c.Decode([]*commonpb.Payload{p})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode = %v; want an error saying %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), string(key)) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
	// A codec that requires encryption accepts the authenticated payload
	// (a holder of the key wrote it), and a ring that holds the key as its
	// second reads it after a rotation.
	strict, _ := New(Options{Keys: [][]byte{key}, RequireEncrypted: true})
	if _, err := strict.Decode([]*commonpb.Payload{good}); err != nil {
		t.Errorf("RequireEncrypted refused an authenticated payload: %v", err)
	}
	plain, _ := converter.GetDefaultDataConverter().ToPayload(answer{SiteID: "site_1"})
	if _, err := strict.Decode([]*commonpb.Payload{plain}); !errors.Is(err, ErrNotEncrypted) {
		t.Errorf("RequireEncrypted on plaintext nobody authenticated: %v; want ErrNotEncrypted", err)
	}
	ring, _ := New(Options{Keys: [][]byte{bytes.Repeat([]byte("n"), 32), key}, Namespace: "prod"})
	var a answer
	if err := ring.DataConverter().FromPayload(good, &a); err != nil || a.SiteID != "site_1" {
		t.Errorf("the ring new,old reading the old key's answer: %+v, %v", a, err)
	}
}

// TestPlaintextOnlyForItsTypes checks that a mark that arrives on a payload
// of another type (a converter.RawValue passed on as it is) is not obeyed,
// and that the codec's own Encode, which the codec server's /encode uses,
// always encrypts.
func TestPlaintextOnlyForItsTypes(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}, Plaintext: []any{answer{}}})
	marked, _ := converter.GetDefaultDataConverter().ToPayload(secret{Reason: "phishing"})
	marked.Metadata[metaPlaintext] = []byte("1")
	p, err := c.DataConverter().ToPayload(converter.NewRawValue(marked))
	if err != nil {
		t.Fatal(err)
	}
	if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding || strings.Contains(string(p.GetData()), "phishing") {
		t.Errorf("a marked RawValue was written as %v; want it encrypted", p)
	}
	if _, still := marked.GetMetadata()[metaPlaintext]; !still {
		t.Error("the RawValue's own payload was changed")
	}
	enc, err := c.Encode([]*commonpb.Payload{marked})
	if err != nil || string(enc[0].GetMetadata()[converter.MetadataEncoding]) != Encoding {
		t.Errorf("Encode of a marked payload = %v, %v; want it encrypted", enc, err)
	}
	if _, err := New(Options{Keys: [][]byte{key}, Plaintext: []any{nil}}); err == nil {
		t.Error("Plaintext: []any{nil} was accepted")
	}
}

// TestCodecServerReturnsAuthenticatedPlaintext checks that /decode, which
// refuses plaintext nobody vouches for, returns an authenticated payload
// as it was before it was authenticated, and refuses a forged one.
func TestCodecServerReturnsAuthenticatedPlaintext(t *testing.T) {
	c, _ := New(Options{Keys: [][]byte{key}, Namespace: "prod", Plaintext: []any{answer{}}})
	srv := newServer(t, c, HandlerOptions{})
	p, _ := c.DataConverter().ToPayload(answer{SiteID: "site_1"})
	body := func(p *commonpb.Payload) []byte {
		b, _ := json.Marshal(map[string]any{"payloads": []any{json.RawMessage(mustProtoJSON(t, p))}})
		return b
	}
	got := post(t, srv.URL+"/decode", "prod", body(p))
	if !strings.Contains(got, "eyJzaXRlX2lkIjoic2l0ZV8xIn0=") || strings.Contains(got, metaAuthTag) { // {"site_id":"site_1"}
		t.Errorf("decode = %s; want the answer without its authentication", got)
	}
	forged := proto.CloneOf(p)
	forged.Data = []byte(`{"site_id":"site_9"}`)
	if code, got := postStatus(t, srv.URL+"/decode", "prod", body(forged)); code != http.StatusBadRequest || !strings.Contains(got, "tampered") {
		t.Errorf("decode of a forged answer = %d %s; want 400 saying tampered", code, got)
	}
}
