package egresstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test. Its certificate is
// written to a PEM file for the programs and daemons that must trust it
// (sandboxd's egress.ca_files, pip --cert, npm --cafile, GIT_SSL_CAINFO,
// SSL_CERT_FILE); its key never leaves memory.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	file string
}

// NewCA makes a CA valid from an hour ago for a day, with its certificate
// in a file under t's temporary folder.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("egresstest: generate the CA key: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "sandboxd egresstest CA", Organization: []string{"sandboxd tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		// Key usage and a subject key id are what strict verifiers
		// (Python 3.13's VERIFY_X509_STRICT) demand of a CA.
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("egresstest: sign the CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("egresstest: parse the CA certificate: %v", err)
	}
	ca := &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.file = filepath.Join(t.TempDir(), "egresstest-ca.pem")
	if err := os.WriteFile(ca.file, ca.pem, 0o644); err != nil {
		t.Fatalf("egresstest: write the CA certificate: %v", err)
	}
	return ca
}

// PEM is the CA certificate, PEM-encoded.
func (c *CA) PEM() []byte { return append([]byte(nil), c.pem...) }

// PEMFile is the path of a file holding the CA certificate in PEM; it is
// removed when the test that made the CA ends.
func (c *CA) PEMFile() string { return c.file }

// Pool is a certificate pool holding the CA alone, for Go clients.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// ServerTLS is a server configuration presenting one certificate signed by
// the CA for names: host names become DNS names of the certificate, IP
// addresses ("127.0.0.1", "::1") IP names. It panics with no names, since a
// certificate no client can match is a mistake in the calling test.
func (c *CA) ServerTLS(names ...string) *tls.Config {
	cert, err := c.Leaf(names...)
	if err != nil {
		panic(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// Leaf is a server certificate with its key for names, as ServerTLS makes.
func (c *CA) Leaf(names ...string) (tls.Certificate, error) {
	if len(names) == 0 {
		return tls.Certificate{}, fmt.Errorf("egresstest: a server certificate needs at least one name; pass the host name the clients dial")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("egresstest: generate a server key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: names[0]},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("egresstest: sign a server certificate for %v: %w", names, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("egresstest: parse a server certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// serial is a random 128-bit certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("egresstest: read random bytes for a serial number: %v", err))
	}
	return n
}
