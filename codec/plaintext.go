package codec

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Authenticated plaintext.
//
// A few of siteops' payloads are read by callers who do not hold
// SITEOPS_PAYLOAD_KEY: the answers of the Nexus service, which reach a
// partner's namespace or a plain HTTP caller (package nexus lists their
// types). A codec given those types (Options.Plaintext) writes their values
// in the clear, with the payload's metadata and data authenticated under
// the key instead of encrypted: anyone reads them, only a holder of the key
// writes them, and Decode tells them from plaintext that nobody vouches
// for — so the codec server and Options.RequireEncrypted accept them, and
// refuse a forged or altered one.
//
// The tag is HMAC-SHA256, under a key derived from each key of the ring
// (never the AES key itself), over every metadata entry but the tag,
// sorted by name and length-prefixed, and the data: the version, the key
// ID and the namespace it was written for are metadata entries, so none
// can be changed or dropped. The metadata names differ from the
// encryption's, so that a release that knows only encryption reads these
// payloads as the plaintext they are rather than as a tampered encrypted
// one.
const (
	metaAuthVersion   = "authentication-version"
	metaAuthKeyID     = "authentication-key-id"
	metaAuthNamespace = "authentication-namespace"
	metaAuthTag       = "authentication-tag"
	authVersion1      = "1"
	// metaPlaintext marks, on its way from the data converter to the
	// codec, the payload of a value of a Plaintext type. The codec
	// replaces it with the authentication; it is never written.
	metaPlaintext = "siteops-plaintext"
	// authDomain separates these tags from any other use of the key.
	authDomain = "siteops-authenticated-payload\x00"
)

// elem is t without its pointers.
func elem(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// authKey derives the key that authenticates plaintext payloads from an
// encryption key.
func authKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("siteops payload authentication " + authVersion1))
	return m.Sum(nil)
}

// authTag is the tag of a payload with metadata md (its own tag, if any,
// left out) and data, under the authentication key mac.
func authTag(mac []byte, md map[string][]byte, data []byte) []byte {
	m := hmac.New(sha256.New, mac)
	m.Write([]byte(authDomain))
	keys := make([]string, 0, len(md))
	for k := range md {
		if k != metaAuthTag {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var n [binary.MaxVarintLen64]byte
	field := func(b []byte) {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		m.Write(b)
	}
	for _, k := range keys {
		field([]byte(k))
		field(md[k])
	}
	field(data)
	return m.Sum(nil)
}

// authenticated reports whether a payload carries any of the
// authentication's metadata.
func authenticated(md map[string][]byte) bool {
	for _, k := range []string{metaAuthVersion, metaAuthKeyID, metaAuthNamespace, metaAuthTag} {
		if _, ok := md[k]; ok {
			return true
		}
	}
	return false
}

// authenticate returns p in plaintext with its authentication under the
// ring's first key, for namespace ns ("" for none).
func (c *AESGCM) authenticate(p *commonpb.Payload, ns string) *commonpb.Payload {
	md := make(map[string][]byte, len(p.GetMetadata())+4)
	for k, v := range p.GetMetadata() {
		if k != metaPlaintext {
			md[k] = v
		}
	}
	md[metaAuthVersion] = []byte(authVersion1)
	md[metaAuthKeyID] = []byte(c.keyID)
	delete(md, metaAuthNamespace)
	if ns != "" {
		md[metaAuthNamespace] = []byte(ns)
	}
	md[metaAuthTag] = authTag(c.macs[c.keyID], md, p.GetData())
	out := proto.CloneOf(p)
	out.Metadata = md
	return out
}

// verify checks an authenticated plaintext payload read in namespace ns
// ("" for any) and returns it as it was before it was authenticated.
func (c *AESGCM) verify(p *commonpb.Payload, ns string) (*commonpb.Payload, error) {
	md, data := p.GetMetadata(), p.GetData()
	if v := string(md[metaAuthVersion]); v != authVersion1 {
		return nil, fmt.Errorf("codec: plaintext payload authentication version %q is unknown; it was written by a newer siteops, upgrade this one", truncate(v, 16))
	}
	id := string(md[metaAuthKeyID])
	mac, ok := c.macs[id]
	if !ok {
		return nil, fmt.Errorf("codec: a plaintext payload was authenticated with key %q, which SITEOPS_PAYLOAD_KEY does not hold (it holds %s); add that key at the end of SITEOPS_PAYLOAD_KEY, after a comma",
			truncate(id, 16), strings.Join(c.keyIDs, ", "))
	}
	if written := string(md[metaAuthNamespace]); ns != "" && written != "" && written != ns {
		return nil, fmt.Errorf("codec: a payload written for namespace %q is read in namespace %q: payloads do not move between namespaces; write it again in %s",
			truncate(written, 64), ns, ns)
	}
	if !hmac.Equal(md[metaAuthTag], authTag(mac, md, data)) {
		return nil, fmt.Errorf("codec: a plaintext payload does not authenticate with key %s (tampered with)", id)
	}
	out := proto.CloneOf(p)
	for _, k := range []string{metaAuthVersion, metaAuthKeyID, metaAuthNamespace, metaAuthTag} {
		delete(out.Metadata, k)
	}
	return out, nil
}

// marking is the default data converter with the payloads of values of a
// Plaintext type marked for dataCodec. It is used by pointer: the SDK
// compares converters (CodecDataConverter.WithSerializationContext), and a
// struct holding a map cannot be compared.
type marking struct {
	converter.DataConverter
	plain map[reflect.Type]bool
}

// ToPayload marks the payload of a value of a Plaintext type.
func (m *marking) ToPayload(v any) (*commonpb.Payload, error) {
	p, err := m.DataConverter.ToPayload(v)
	if err != nil || p == nil {
		return p, err
	}
	return m.mark(v, p), nil
}

// ToPayloads marks the payloads of the values of a Plaintext type.
func (m *marking) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	ps, err := m.DataConverter.ToPayloads(values...)
	if err != nil || ps == nil {
		return ps, err
	}
	out := make([]*commonpb.Payload, len(ps.GetPayloads()))
	for i, p := range ps.GetPayloads() {
		var v any // a payload without its value is never plaintext
		if len(ps.GetPayloads()) == len(values) {
			v = values[i]
		}
		out[i] = m.mark(v, p)
	}
	return &commonpb.Payloads{Payloads: out}, nil
}

// mark returns p marked when v is of a Plaintext type and unmarked
// otherwise: a payload passed through as it is (a converter.RawValue, say)
// is never written in plaintext for a mark it arrived with.
func (m *marking) mark(v any, p *commonpb.Payload) *commonpb.Payload {
	plain := m.plain[elem(reflect.TypeOf(v))]
	if _, marked := p.GetMetadata()[metaPlaintext]; marked == plain {
		return p
	}
	out := proto.CloneOf(p)
	if plain {
		if out.Metadata == nil {
			out.Metadata = map[string][]byte{}
		}
		out.Metadata[metaPlaintext] = []byte("1")
	} else {
		delete(out.Metadata, metaPlaintext)
	}
	return out
}

// dataCodec is the codec of DataConverter: it authenticates the payloads
// marking marked and encrypts every other one.
type dataCodec struct{ c *AESGCM }

var _ converter.PayloadCodec = (*dataCodec)(nil)

// Encode authenticates marked payloads and encrypts the rest.
func (d *dataCodec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if _, marked := p.GetMetadata()[metaPlaintext]; marked {
			out[i] = d.c.authenticate(p, d.c.namespace)
			continue
		}
		enc, err := d.c.encode([]*commonpb.Payload{p}, d.c.namespace)
		if err != nil {
			return nil, err
		}
		out[i] = enc[0]
	}
	return out, nil
}

// Decode is the codec's Decode.
func (d *dataCodec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return d.c.Decode(payloads)
}
