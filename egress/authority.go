package egress

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

const (
	caCertFile = "ca.crt"
	caKeyFile  = "ca.key"
	// caLifetime is long: the certificate is installed in every sandbox and
	// rotating it means restarting them all.
	caLifetime = 10 * 365 * 24 * time.Hour
	// leafLifetime is short so a leaked leaf key is useful for days, not
	// years; leafRenew is how long before expiry a cached leaf is replaced.
	leafLifetime = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	// leafCacheMax bounds the leaf cache; intercepted hosts are the few a
	// secret names, so the bound is only a guard against a flood of names.
	leafCacheMax = 1024
	// caPublishWait bounds how long a start that lost the race to create the
	// authority waits for the winner to publish the certificate.
	caPublishWait = 5 * time.Second
)

// Authority is a per-deployment certificate authority that signs the leaf
// certificates presented to a sandbox for the hosts whose requests carry a
// secret. Its certificate is installed in the sandbox; its key never leaves
// the daemon's directory.
type Authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer // ECDSA when sandboxd made it; RSA or ECDSA when given (ca_dir)

	// mu guards leaves.
	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadOrCreateAuthority reads ca.crt and ca.key from dir, creating both the
// first time. Creation publishes the key, then the certificate, each by a
// hard link from a temporary file, so two daemons starting at once agree on
// one pair: the one whose link fails reads the winner's.
func LoadOrCreateAuthority(dir string) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the egress CA directory %s failed: %w", dir, err)
	}
	a, err := loadAuthority(dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	if err := createAuthority(dir); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(caPublishWait)
	for {
		a, err := loadAuthority(dir)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("the egress CA in %s has %s but no %s after %s; if no other daemon is starting, remove both files and start again", dir, caKeyFile, caCertFile, caPublishWait)
			}
			return a, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func loadAuthority(dir string) (*Authority, error) {
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the egress CA in %s is unusable (%v); remove %s and %s to create a new one, then restart the sandboxes", dir, err, caCertFile, caKeyFile)
	}
	var key crypto.Signer
	switch k := pair.PrivateKey.(type) {
	case *ecdsa.PrivateKey:
		key = k
	case *rsa.PrivateKey:
		key = k // what Helm's genCA makes for a chart-provided CA
	default:
		return nil, fmt.Errorf("the egress CA key in %s is neither ECDSA nor RSA; remove %s and %s to create a new one", dir, caCertFile, caKeyFile)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("the egress CA certificate in %s cannot be parsed: %w", dir, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("the egress CA certificate in %s is not a CA certificate; remove %s and %s to create a new one", dir, caCertFile, caKeyFile)
	}
	return &Authority{cert: cert, certPEM: certPEM, key: key, leaves: map[string]*tls.Certificate{}}, nil
}

// createAuthority writes a new pair unless another start already published
// one; losing the race is not an error.
func createAuthority(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the egress CA key failed: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "sandboxd egress CA", Organization: []string{"sandboxd"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("creating the egress CA certificate failed: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding the egress CA key failed: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	won, err := publish(dir, caKeyFile, keyPEM, 0o600)
	if err != nil || !won {
		return err
	}
	_, err = publish(dir, caCertFile, certPEM, 0o644)
	return err
}

// publish writes data to a temporary file in dir and links it to name; won
// is false when name already existed.
func publish(dir, name string, data []byte, mode os.FileMode) (won bool, err error) {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return false, fmt.Errorf("writing the egress CA's %s failed: %w", name, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return false, fmt.Errorf("writing the egress CA's %s failed: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, fmt.Errorf("writing the egress CA's %s failed: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, fmt.Errorf("writing the egress CA's %s failed: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("writing the egress CA's %s failed: %w", name, err)
	}
	if err := os.Link(tmp, filepath.Join(dir, name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("publishing the egress CA's %s failed: %w", name, err)
	}
	return true, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n.Add(n, big.NewInt(1))
}

// CertPEM is the authority's certificate, for the sandbox's trust store.
func (a *Authority) CertPEM() []byte { return append([]byte(nil), a.certPEM...) }

// Certificate is the authority's parsed certificate.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// Leaf returns a certificate for host (a lower-case DNS name or an IP
// literal), signed by the authority, from the cache while it has more than a
// day left.
func (a *Authority) Leaf(host string) (*tls.Certificate, error) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[host]; ok && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	c, err := a.sign(host, now)
	if err != nil {
		return nil, err
	}
	if len(a.leaves) >= leafCacheMax {
		for h := range a.leaves { // map order: an arbitrary entry goes
			delete(a.leaves, h)
			break
		}
	}
	a.leaves[host] = c
	return c, nil
}

func (a *Authority) sign(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key for %s's certificate failed: %w", host, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	if tmpl.NotAfter.After(a.cert.NotAfter) {
		tmpl.NotAfter = a.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("signing %s's certificate failed: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}
