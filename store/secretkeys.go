package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// HKDF labels of the keys derived from SITEOPS_SECRET_KEY. Each purpose
// gets its own label, so that no derived key is ever the key material of
// another purpose (the payload codec's key among them), even when an
// operator sets one value for both variables.
//
//nolint:gosec // labels that name purposes, not credentials
const (
	secretSealLabel  = "siteops/webhook-secrets/seal/v2"
	secretKeyIDLabel = "siteops/webhook-secrets/key-id/v2"
	secretAADPrefix  = "siteops/webhook-secret/v2"
)

// secretKeys are the keys that seal signing secrets, derived from one
// SITEOPS_SECRET_KEY.
type secretKeys struct {
	aead cipher.AEAD // AES-256-GCM under the HKDF-derived sealing key
	id   string      // key id stored beside each secret: a one-way digest, never the key
	// legacy is AES-256-GCM under the raw key, with the endpoint id as the
	// only additional data: the first format, read (key_id '') and
	// rewritten by Rekey, never written.
	legacy cipher.AEAD
}

func newSecretKeys(key []byte) (*secretKeys, error) {
	sealKey, err := hkdf.Key(sha256.New, key, nil, secretSealLabel, 32)
	if err != nil {
		return nil, err
	}
	idBytes, err := hkdf.Key(sha256.New, key, nil, secretKeyIDLabel, 6)
	if err != nil {
		return nil, err
	}
	aead, err := newGCM(sealKey)
	if err != nil {
		return nil, err
	}
	legacy, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	return &secretKeys{aead: aead, id: "k2-" + hex.EncodeToString(idBytes), legacy: legacy}, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// binding is what a stored secret is bound to: the additional data of its
// sealing. Editing any of it in the database (moving a secret to another
// receiver, clearing or postponing its retirement) makes the secret fail
// to decrypt, so it is refused instead of accepted.
type binding struct {
	endpointID  string
	receiver    string
	retireAfter *time.Time
	retiredAt   *time.Time
}

func (b binding) aad() []byte {
	// Times are bound to the microsecond, the precision both databases keep.
	t := func(p *time.Time) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(p.UTC().Truncate(time.Microsecond).UnixMicro(), 10)
	}
	return []byte(secretAADPrefix + "\x00" + b.endpointID + "\x00" + b.receiver + "\x00" + t(b.retireAfter) + "\x00" + t(b.retiredAt))
}

// seal encrypts plain bound to b under the derived key.
func (k *secretKeys) seal(b binding, plain string) ([]byte, error) {
	return sealWith(k.aead, b.aad(), plain)
}

// open decrypts a secret stored with keyID: the first format (empty id) or this
// key's.
func (k *secretKeys) open(keyID string, b binding, sealed []byte) (string, bool) {
	switch keyID {
	case "":
		return openWith(k.legacy, []byte(b.endpointID), sealed)
	case k.id:
		return openWith(k.aead, b.aad(), sealed)
	}
	return "", false
}

func sealWith(aead cipher.AEAD, aad []byte, plain string) ([]byte, error) {
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, []byte(plain), aad), nil
}

func openWith(aead cipher.AEAD, aad, sealed []byte) (string, bool) {
	n := aead.NonceSize()
	if len(sealed) < n {
		return "", false
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return "", false
	}
	return string(plain), true
}
