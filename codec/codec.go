// Package codec encrypts every Temporal payload siteops writes — workflow
// inputs and results, activity inputs and results, signals, queries,
// updates, memos — with AES-256-GCM under SITEOPS_PAYLOAD_KEY, so that the
// Temporal server and its database hold only ciphertext. `siteops
// codec-server` decodes them for the Temporal Web UI of people who hold the
// key.
//
// Secrets and lead records never enter payloads in the first place (see
// package activities); the codec protects the rest: site content, origins,
// incident reasons. The exceptions are the types a codec is given in
// Options.Plaintext — the answers of the Nexus service, which partners read
// without the key — whose payloads it writes in the clear and
// authenticates instead (plaintext.go). What the codec never sees: failure
// messages and the details of errors, which Temporal's default failure
// converter writes in the clear, so siteops keeps secrets out of them.
//
// A payload is bound to what it belongs to as far as a codec can know it:
// its namespace (the client's, for the SDK; the X-Namespace header the Web
// UI and the CLI send, for the codec server) and its original metadata —
// the whole original payload, encoding and all, is the plaintext, so the tag
// covers it. A payload copied from one namespace's history into another
// does not decode there. The codec deliberately leaves out binding a
// payload to its workflow or event: the SDK hands a codec payloads without
// saying whose they are.
//
// Keys rotate through a key ring (ParseKeyRing, Options.Keys):
// SITEOPS_PAYLOAD_KEY=<new>,<old>,... encrypts with the first key and
// decrypts with whichever key a payload names by its ID, so that a key can
// be replaced while histories written under the old one are still read.
//
// A codec refuses nothing for being unencrypted unless told to
// (Options.RequireEncrypted): a worker must still read the plaintext its
// callers without the key send — a workflow started through Temporal's HTTP
// API or `temporal workflow start` without a codec, a history written
// before the key was set. The codec server (NewHandler) refuses plaintext
// by default: it serves people reading histories, who should see that such
// a payload was not written by a holder of the key rather than see it as if
// it had been. An authenticated plaintext payload was written by a holder
// of the key, so both accept it once its tag verifies.
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
//
// Version 1 (no encryption-version field) authenticated only the key ID as
// additional data. Version 2 authenticates every field of the outer
// metadata — the format's name and version, the key ID, the cipher and the
// encoding — so that none of them can be changed or dropped without the
// payload failing to decrypt: a version-2 payload stripped of its version
// does not open as version 1. Version 3, the one written now, adds the
// namespace the payload was written for (encryption-namespace, absent for
// a codec given none). In every version the inner payload, data and
// metadata (its original encoding) alike, is the plaintext, so the tag
// covers it too. Payloads of versions 1 and 2 stay readable in any
// namespace: histories written before version 3 exist.
const (
	Encoding      = "binary/encrypted"
	metaKeyID     = "encryption-key-id"
	metaCipher    = "encryption-cipher"
	metaVersion   = "encryption-version"
	metaNamespace = "encryption-namespace"
	cipherName    = "AES256-GCM"
	version2      = "2"
	version3      = "3"
	encodingKey   = converter.MetadataEncoding
)

// namespaceName is what a Temporal namespace name may be here: it goes into
// the additional data between NUL separators, and into error messages.
var namespaceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$`)

// ErrNotEncrypted is the error Decode returns for a payload that is
// neither encrypted nor authenticated (Options.Plaintext), when the codec
// requires encryption (Options.RequireEncrypted).
var ErrNotEncrypted = errors.New("codec: a payload is not encrypted")

// AESGCM is a converter.PayloadCodec over a key ring: the first key
// encrypts, every key decrypts the payloads that name it.
type AESGCM struct {
	aead             cipher.AEAD // the first key's, which encrypts
	keyID            string      // the first key's ID
	keys             map[string]cipher.AEAD
	keyIDs           []string          // in the ring's order
	macs             map[string][]byte // authentication keys by key ID (plaintext.go)
	plain            map[reflect.Type]bool
	namespace        string
	requireEncrypted bool
}

var _ converter.PayloadCodec = (*AESGCM)(nil)

// Options configures New.
type Options struct {
	// Keys is the key ring, of 32-byte keys: Keys[0] encrypts, and a
	// payload decrypts with the key of the ring whose ID it carries (one
	// key is a ring of one). A key listed twice is refused: it would be a
	// ring that cannot say which of its entries to drop.
	Keys [][]byte
	// Namespace binds the payloads the codec writes to a Temporal
	// namespace, and makes it refuse payloads written for another one: the
	// client's namespace, for a worker or a starter. A codec without it
	// ("") writes payloads bound to no namespace and reads those of any.
	Namespace string
	// RequireEncrypted makes Decode refuse a payload that is not encrypted
	// (ErrNotEncrypted) instead of passing it through; a plaintext payload
	// authenticated under the key (Plaintext) is accepted, since only a
	// holder of the key writes one. With the key set, siteops itself writes
	// nothing in the clear unauthenticated, so a plaintext payload was
	// written by a client without the key — a `temporal workflow signal`
	// without a codec, or someone who can reach Temporal but does not hold
	// the key — and only encryption proves who wrote a payload. It is a
	// setting, not the default for a worker, because callers without the
	// key write plaintext that the worker must read — a workflow started
	// through Temporal's HTTP API or a CLI without the codec — and
	// workflows that were already running when the key was first set have
	// plaintext payloads in their histories: a worker that refused them
	// could not replay those workflows. The codec server refuses plaintext
	// by default (NewHandler).
	RequireEncrypted bool
	// Plaintext makes the codec's DataConverter write the values of the
	// types of its values (each given as a value or a pointer to one) in
	// plaintext, authenticated under the key rather than encrypted: for
	// the answers that callers without the key read. Only types whose
	// every field may be read by anyone belong here; nothing secret or
	// personal (plaintext.go).
	Plaintext []any
}

// ParseKeyRing decodes SITEOPS_PAYLOAD_KEY: one key, or a key ring of
// keys separated by commas, the first of which encrypts while all of them
// decrypt ("<new>,<old1>,<old2>"). Each key is 32 bytes in standard base64
// (whose alphabet holds no comma). Its errors name a key by its place in
// the ring, never by its value.
func ParseKeyRing(s string) ([][]byte, error) {
	fields := strings.Split(s, ",")
	keys := make([][]byte, 0, len(fields))
	for i, f := range fields {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(f))
		if err != nil || len(key) != 32 {
			if len(fields) == 1 {
				return nil, errors.New("SITEOPS_PAYLOAD_KEY must be 32 random bytes in base64; make one with `openssl rand -base64 32`")
			}
			return nil, fmt.Errorf("SITEOPS_PAYLOAD_KEY holds %d keys separated by commas, and key %d is not 32 random bytes in base64; make one with `openssl rand -base64 32`", len(fields), i+1)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// New returns a codec for the key ring o.Keys, with o's settings.
func New(o Options) (*AESGCM, error) {
	if len(o.Keys) == 0 {
		return nil, errors.New("codec: the key ring is empty; set SITEOPS_PAYLOAD_KEY to a key made with `openssl rand -base64 32`")
	}
	c := &AESGCM{keys: make(map[string]cipher.AEAD, len(o.Keys)), macs: make(map[string][]byte, len(o.Keys)), plain: map[reflect.Type]bool{}}
	for i, key := range o.Keys {
		if len(key) != 32 {
			return nil, fmt.Errorf("codec: key %d of the ring is %d bytes, want 32", i+1, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		id := KeyID(key)
		if _, dup := c.keys[id]; dup {
			return nil, fmt.Errorf("codec: key %d of the ring has the ID %s of an earlier key (the same key twice); list each key once in SITEOPS_PAYLOAD_KEY", i+1, id)
		}
		c.keys[id] = aead
		c.macs[id] = authKey(key)
		c.keyIDs = append(c.keyIDs, id)
	}
	c.keyID = c.keyIDs[0]
	c.aead = c.keys[c.keyID]
	if o.Namespace != "" && !namespaceName.MatchString(o.Namespace) {
		return nil, fmt.Errorf("codec: %q is not a Temporal namespace name (letters, digits, '.', '_' and '-'); check TEMPORAL_NAMESPACE", truncate(o.Namespace, 64))
	}
	c.namespace = o.Namespace
	c.requireEncrypted = o.RequireEncrypted
	for _, v := range o.Plaintext {
		t := elem(reflect.TypeOf(v))
		if t == nil {
			return nil, errors.New("codec: Plaintext was given nil; give a value of each type")
		}
		c.plain[t] = true
	}
	return c, nil
}

// KeyID is the ID that names key in the metadata of the payloads it
// encrypts: the first 4 bytes of its SHA-256 in hex, which reveal nothing
// of the key.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// KeyID names the key that encrypts, the ring's first, without revealing
// it, as payload metadata does.
func (c *AESGCM) KeyID() string { return c.keyID }

// KeyIDs names every key of the ring, in its order: the first encrypts.
func (c *AESGCM) KeyIDs() []string { return append([]string(nil), c.keyIDs...) }

// Namespace is the namespace the codec binds payloads to ("" for none).
func (c *AESGCM) Namespace() string { return c.namespace }

// DataConverter wraps the default converter with the codec: it encrypts
// every payload but those of the Plaintext types, which it authenticates,
// and reads all of them.
func (c *AESGCM) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(&marking{converter.GetDefaultDataConverter(), c.plain}, &dataCodec{c})
}

// aadV2 is the additional data of a version-2 payload: every field of its
// outer metadata, each ended by a NUL (none of them can hold one: the key
// ID is hex, the rest are constants).
func aadV2(keyID string) []byte {
	return []byte("siteops-payload\x00" + version2 + "\x00" + keyID + "\x00" + cipherName + "\x00" + Encoding + "\x00")
}

// aadV3 is the additional data of a version-3 payload: version 2's fields
// and the namespace it was written for, each ended by a NUL (a namespace
// name holds none, see namespaceName).
func aadV3(keyID, namespace string) []byte {
	return []byte("siteops-payload\x00" + version3 + "\x00" + keyID + "\x00" + cipherName + "\x00" + Encoding + "\x00" + namespace + "\x00")
}

// Encode encrypts each payload whole (metadata and data), always: what it
// returns is never plaintext, whatever it is given. The payloads are bound
// to the codec's namespace.
func (c *AESGCM) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return c.encode(payloads, c.namespace)
}

// encode encrypts payloads for namespace ns ("" for none).
func (c *AESGCM) encode(payloads []*commonpb.Payload, ns string) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aad := aadV3(c.keyID, ns)
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		md := map[string][]byte{
			encodingKey: []byte(Encoding), metaKeyID: []byte(c.keyID),
			metaCipher: []byte(cipherName), metaVersion: []byte(version3),
		}
		if ns != "" {
			md[metaNamespace] = []byte(ns)
		}
		out[i] = &commonpb.Payload{Metadata: md, Data: c.aead.Seal(nonce, nonce, plain, aad)}
	}
	return out, nil
}

// Decode decrypts payloads this codec encrypted, of any version, and
// verifies and returns as they were those it authenticated in plaintext
// (Options.Plaintext). A payload that is neither passes through unchanged,
// unless the codec requires encryption; a payload that carries encryption
// metadata under another encoding is refused, since only tampering makes
// one; so is one whose authentication does not verify, and one written for
// another namespace than the codec's.
func (c *AESGCM) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return c.decode(payloads, c.namespace, c.requireEncrypted)
}

// decode decrypts payloads read in namespace ns ("" for any), refusing
// plaintext when requireEncrypted.
func (c *AESGCM) decode(payloads []*commonpb.Payload, ns string, requireEncrypted bool) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		md := p.GetMetadata()
		if string(md[encodingKey]) != Encoding && authenticated(md) {
			plain, err := c.verify(p, ns)
			if err != nil {
				return nil, err
			}
			out[i] = plain
			continue
		}
		if string(md[encodingKey]) != Encoding {
			if _, ok := md[metaKeyID]; ok {
				return nil, fmt.Errorf("codec: a payload has encryption metadata but the encoding %q: it was tampered with", truncate(string(md[encodingKey]), 40))
			}
			if requireEncrypted {
				return nil, fmt.Errorf("%w (encoding %q): it was written by a client without SITEOPS_PAYLOAD_KEY; write it again with the key", ErrNotEncrypted, truncate(string(md[encodingKey]), 40))
			}
			out[i] = p
			continue
		}
		dec, err := c.open(md, p.GetData(), ns)
		if err != nil {
			return nil, err
		}
		out[i] = dec
	}
	return out, nil
}

// open decrypts one encrypted payload read in namespace ns ("" for any)
// with the key of the ring it names, choosing the additional data by its
// version. A version-3 payload written for no namespace opens in any: only
// a codec given none writes one.
func (c *AESGCM) open(md map[string][]byte, data []byte, ns string) (*commonpb.Payload, error) {
	id := string(md[metaKeyID])
	aead, ok := c.keys[id]
	if !ok {
		return nil, fmt.Errorf("codec: a payload was encrypted with key %q, which SITEOPS_PAYLOAD_KEY does not hold (it holds %s); add that key at the end of SITEOPS_PAYLOAD_KEY, after a comma",
			truncate(id, 16), strings.Join(c.keyIDs, ", "))
	}
	if name, ok := md[metaCipher]; ok && string(name) != cipherName {
		return nil, fmt.Errorf("codec: payload encrypted with cipher %q, this codec knows only %s", truncate(string(name), 40), cipherName)
	}
	var aad []byte
	switch v, ok := md[metaVersion]; {
	case !ok:
		aad = []byte(id) // version 1
	case string(v) == version2:
		aad = aadV2(id)
	case string(v) == version3:
		written := string(md[metaNamespace])
		if ns != "" && written != "" && written != ns {
			return nil, fmt.Errorf("codec: a payload written for namespace %q is read in namespace %q: payloads do not move between namespaces; write it again in %s",
				truncate(written, 64), ns, ns)
		}
		aad = aadV3(id, written)
	default:
		return nil, fmt.Errorf("codec: payload encryption version %q is unknown; it was written by a newer siteops, upgrade this one", truncate(string(v), 16))
	}
	n := aead.NonceSize()
	if len(data) < n {
		return nil, errors.New("codec: encrypted payload too short")
	}
	plain, err := aead.Open(nil, data[:n], data[n:], aad)
	if err != nil {
		return nil, fmt.Errorf("codec: an encrypted payload does not decrypt with key %s (tampered with)", id)
	}
	var dec commonpb.Payload
	if err := proto.Unmarshal(plain, &dec); err != nil {
		return nil, err
	}
	return &dec, nil
}

// truncate bounds a value taken from a payload or a request before it goes
// into an error or a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
