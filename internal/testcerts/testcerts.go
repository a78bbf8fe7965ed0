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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files are the PEM files of one test PKI.
type Files struct {
	CA         string // the CA's certificate
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
		CA: filepath.Join(dir, name+"-ca.pem"), ServerCert: filepath.Join(dir, name+"-server.pem"), ServerKey: filepath.Join(dir, name+"-server-key.pem"),
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
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certPath, keyPath string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
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
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		return writePEM(keyPath, "EC PRIVATE KEY", kb)
	}
	if err := leaf(2, "localhost", x509.ExtKeyUsageServerAuth, f.ServerCert, f.ServerKey); err != nil {
		return f, err
	}
	if err := leaf(3, name+" client", x509.ExtKeyUsageClientAuth, f.ClientCert, f.ClientKey); err != nil {
		return f, err
	}
	return f, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
