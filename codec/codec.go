// Package codec encrypts every Temporal payload siteops writes — workflow
// inputs and results, activity inputs and results, signals, queries,
// updates, memos — with AES-256-GCM under SITEOPS_PAYLOAD_KEY, so that the
// Temporal server and its database hold only ciphertext. `siteops
// codec-server` decodes them for the Temporal Web UI of people who hold the
// key.
//
// Secrets and lead records never enter payloads in the first place (see
// package activities); the codec protects the rest: site content, origins,
// incident reasons. It deliberately leaves out key rotation (one key at a
// time, named by its ID in every payload) and binding a payload to its
// workflow (the SDK hands a codec payloads without saying whose they are).
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
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
//
// Version 1 (no encryption-version field) authenticated only the key ID as
// additional data. Version 2, the one written now, authenticates every
// field of the outer metadata — the format's name and version, the key ID,
// the cipher and the encoding — so that none of them can be changed or
// dropped without the payload failing to decrypt: a version-2 payload
// stripped of its version does not open as version 1. The inner payload,
// data and metadata (its original encoding) alike, is the plaintext, so the
// tag covers it too. Version-1 payloads stay readable: histories written
// before version 2 exist.
const (
	Encoding    = "binary/encrypted"
	metaKeyID   = "encryption-key-id"
	metaCipher  = "encryption-cipher"
	metaVersion = "encryption-version"
	cipherName  = "AES256-GCM"
	version2    = "2"
	encodingKey = converter.MetadataEncoding
)

// ErrNotEncrypted is the error Decode returns for a payload that is not
// encrypted, when the codec requires encryption (RequireEncrypted).
var ErrNotEncrypted = errors.New("codec: a payload is not encrypted")

// AESGCM is a converter.PayloadCodec.
type AESGCM struct {
	aead             cipher.AEAD
	keyID            string
	requireEncrypted bool
}

var _ converter.PayloadCodec = (*AESGCM)(nil)

// Option tunes New.
type Option func(*AESGCM)

// RequireEncrypted makes Decode refuse a payload that is not encrypted
// (ErrNotEncrypted) instead of passing it through. With the key set,
// siteops itself writes nothing in the clear, so a plaintext payload was
// written by a client without the key — a `temporal workflow signal`
// without a codec, or someone who can reach Temporal but does not hold the
// key — and only encryption proves who wrote a payload. It is an option,
// not the default, because workflows that were already running when the key
// was first set have plaintext payloads in their histories: a worker that
// refused them could not replay those workflows.
func RequireEncrypted() Option {
	return func(c *AESGCM) { c.requireEncrypted = true }
}

// ParseKey decodes SITEOPS_PAYLOAD_KEY: 32 bytes in standard base64.
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(key) != 32 {
		return nil, errors.New("SITEOPS_PAYLOAD_KEY must be 32 random bytes in base64; make one with `openssl rand -base64 32`")
	}
	return key, nil
}

// New returns a codec for a 32-byte key.
func New(key []byte, opts ...Option) (*AESGCM, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("codec: the key is %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	c := &AESGCM{aead: aead, keyID: hex.EncodeToString(sum[:4])}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// KeyID names the key without revealing it, as payload metadata does.
func (c *AESGCM) KeyID() string { return c.keyID }

// DataConverter wraps the default converter with the codec.
func (c *AESGCM) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// aadV2 is the additional data of a version-2 payload: every field of its
// outer metadata, each ended by a NUL (none of them can hold one: the key
// ID is hex, the rest are constants).
func aadV2(keyID string) []byte {
	return []byte("siteops-payload\x00" + version2 + "\x00" + keyID + "\x00" + cipherName + "\x00" + Encoding + "\x00")
}

// Encode encrypts each payload whole (metadata and data), always: what it
// returns is never plaintext, whatever it is given.
func (c *AESGCM) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	aad := aadV2(c.keyID)
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, c.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				encodingKey: []byte(Encoding), metaKeyID: []byte(c.keyID),
				metaCipher: []byte(cipherName), metaVersion: []byte(version2),
			},
			Data: c.aead.Seal(nonce, nonce, plain, aad),
		}
	}
	return out, nil
}

// Decode decrypts payloads this codec encrypted, of either version. A
// payload that is not encrypted passes through unchanged, unless the codec
// requires encryption; a payload that carries encryption metadata under
// another encoding is refused, since only tampering makes one.
func (c *AESGCM) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		md := p.GetMetadata()
		if string(md[encodingKey]) != Encoding {
			if _, ok := md[metaKeyID]; ok {
				return nil, fmt.Errorf("codec: a payload has encryption metadata but the encoding %q: it was tampered with", truncate(string(md[encodingKey]), 40))
			}
			if c.requireEncrypted {
				return nil, fmt.Errorf("%w (encoding %q): it was written by a client without SITEOPS_PAYLOAD_KEY; write it again with the key", ErrNotEncrypted, truncate(string(md[encodingKey]), 40))
			}
			out[i] = p
			continue
		}
		dec, err := c.open(md, p.GetData())
		if err != nil {
			return nil, err
		}
		out[i] = dec
	}
	return out, nil
}

// open decrypts one encrypted payload, choosing the additional data by its
// version.
func (c *AESGCM) open(md map[string][]byte, data []byte) (*commonpb.Payload, error) {
	if id := string(md[metaKeyID]); id != c.keyID {
		return nil, fmt.Errorf("codec: payload encrypted with key %s, this key is %s; set SITEOPS_PAYLOAD_KEY to the key it was written with", truncate(id, 16), c.keyID)
	}
	if name, ok := md[metaCipher]; ok && string(name) != cipherName {
		return nil, fmt.Errorf("codec: payload encrypted with cipher %q, this codec knows only %s", truncate(string(name), 40), cipherName)
	}
	var aad []byte
	switch v, ok := md[metaVersion]; {
	case !ok:
		aad = []byte(c.keyID) // version 1
	case string(v) == version2:
		aad = aadV2(c.keyID)
	default:
		return nil, fmt.Errorf("codec: payload encryption version %q is unknown; it was written by a newer siteops, upgrade this one", truncate(string(v), 16))
	}
	n := c.aead.NonceSize()
	if len(data) < n {
		return nil, errors.New("codec: encrypted payload too short")
	}
	plain, err := c.aead.Open(nil, data[:n], data[n:], aad)
	if err != nil {
		return nil, errors.New("codec: an encrypted payload does not decrypt (tampered, or another key)")
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
