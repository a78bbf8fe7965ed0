// Package codec encrypts every Temporal payload siteops writes — workflow
// inputs and results, activity inputs and results, signals, queries,
// updates, memos — with AES-256-GCM under SITEOPS_PAYLOAD_KEY, so that the
// Temporal server and its database hold only ciphertext. `siteops
// codec-server` decodes them for the Temporal Web UI of people who hold the
// key.
//
// Secrets and lead records never enter payloads in the first place (see
// package activities); the codec protects the rest: site content, origins,
// incident reasons.
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
const (
	Encoding    = "binary/encrypted"
	metaKeyID   = "encryption-key-id"
	metaCipher  = "encryption-cipher"
	cipherName  = "AES256-GCM"
	encodingKey = converter.MetadataEncoding
)

// AESGCM is a converter.PayloadCodec.
type AESGCM struct {
	aead  cipher.AEAD
	keyID string
}

var _ converter.PayloadCodec = (*AESGCM)(nil)

// ParseKey decodes SITEOPS_PAYLOAD_KEY: 32 bytes in standard base64.
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(key) != 32 {
		return nil, errors.New("SITEOPS_PAYLOAD_KEY must be 32 random bytes in base64; make one with `openssl rand -base64 32`")
	}
	return key, nil
}

// New returns a codec for a 32-byte key.
func New(key []byte) (*AESGCM, error) {
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
	return &AESGCM{aead: aead, keyID: hex.EncodeToString(sum[:4])}, nil
}

// KeyID names the key without revealing it, as payload metadata does.
func (c *AESGCM) KeyID() string { return c.keyID }

// DataConverter wraps the default converter with the codec.
func (c *AESGCM) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Encode encrypts each payload whole (metadata and data).
func (c *AESGCM) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
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
			Metadata: map[string][]byte{encodingKey: []byte(Encoding), metaKeyID: []byte(c.keyID), metaCipher: []byte(cipherName)},
			Data:     c.aead.Seal(nonce, nonce, plain, []byte(c.keyID)),
		}
	}
	return out, nil
}

// Decode decrypts payloads this codec encrypted and passes others through.
func (c *AESGCM) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[encodingKey]) != Encoding {
			out[i] = p
			continue
		}
		if id := string(p.GetMetadata()[metaKeyID]); id != c.keyID {
			return nil, fmt.Errorf("codec: payload encrypted with key %s, this key is %s; set SITEOPS_PAYLOAD_KEY to the key it was written with", id, c.keyID)
		}
		n := c.aead.NonceSize()
		if len(p.GetData()) < n {
			return nil, errors.New("codec: encrypted payload too short")
		}
		plain, err := c.aead.Open(nil, p.GetData()[:n], p.GetData()[n:], []byte(c.keyID))
		if err != nil {
			return nil, errors.New("codec: an encrypted payload does not decrypt (tampered, or another key)")
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, err
		}
		out[i] = &dec
	}
	return out, nil
}
