// Package testcerts makes a certificate authority and server and client
// certificates for tests of TLS and mutual TLS on 127.0.0.1, written as PEM
// files. Keys are ECDSA P-256; the certificates are valid for a day.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files are the PEM files of one test PKI.
type Files struct {
	CA         string // the CA's certificate
	CAKey      string // the CA's key, for Client
	ServerCert string // for 127.0.0.1, ::1 and localhost
	ServerKey  string
	ClientCert string // for client authentication
	ClientKey  string
	// ServerName is the DNS name in the server certificate.
	ServerName string
}

// Write makes a CA named name and a server and a client certificate signed
// by it, in dir.
func Write(dir, name string) (Files, error) {
	f := Files{
		CA: filepath.Join(dir, name+"-ca.pem"), CAKey: filepath.Join(dir, name+"-ca-key.pem"),
		ServerCert: filepath.Join(dir, name+"-server.pem"), ServerKey: filepath.Join(dir, name+"-server-key.pem"),
		ClientCert: filepath.Join(dir, name+"-client.pem"), ClientKey: filepath.Join(dir, name+"-client-key.pem"), ServerName: "localhost",
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	if err := writeKey(f.CAKey, caKey); err != nil {
		return f, err
	}
	// The roles of siteops' server build (deploy/temporal-server): the
	// server's certificate is Temporal's own, which its services present
	// to each other; the client's is the worker's.
	if err := f.leaf("localhost", "admin", x509.ExtKeyUsageServerAuth, f.ServerCert, f.ServerKey); err != nil {
		return f, err
	}
	if err := f.leaf(name+" client", "worker", x509.ExtKeyUsageClientAuth, f.ClientCert, f.ClientKey); err != nil {
		return f, err
	}
	return f, nil
}

// Client makes another client certificate signed by f's CA, its subject's
// common name cn, in dir, and returns the paths of the certificate and its
// key. It names no role.
func (f Files) Client(dir, cn string) (cert, key string, err error) {
	return f.ClientAs(dir, cn, "")
}

// ClientAs is Client with the role of siteops' server build in the
// subject's organizational unit (none when role is empty).
func (f Files) ClientAs(dir, cn, role string) (cert, key string, err error) {
	base := filepath.Join(dir, strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, cn))
	if role != "" {
		base += "-" + role
	}
	cert, key = base+"-client.pem", base+"-client-key.pem"
	return cert, key, f.leaf(cn, role, x509.ExtKeyUsageClientAuth, cert, key)
}

// leaf writes a certificate for cn (with the organizational unit ou, when
// given), signed by f's CA, with the usage (and client authentication),
// valid for 127.0.0.1, ::1 and localhost.
func (f Files) leaf(cn, ou string, usage x509.ExtKeyUsage, certPath, keyPath string) error {
	ca, caKey, err := f.authority()
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn, OrganizationalUnit: nonEmpty(ou)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage, x509.ExtKeyUsageClientAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(keyPath, key)
}

// authority reads f's CA certificate and key.
func (f Files) authority() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(f.CAKey)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("testcerts: the CA's files hold no PEM block")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", kb)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// nonEmpty is s as a list: none when s is empty.
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
