package egress

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestAuthorityCreatedOnceWithModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	a, err := LoadOrCreateAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"ca.crt": 0o644, "ca.key": 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", name, st.Mode().Perm(), want)
		}
	}
	b, err := LoadOrCreateAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Error("a second start made a new authority instead of loading the first")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestAuthorityRacingStarts starts several daemons on one directory at once:
// all must end up with the same authority.
func TestAuthorityRacingStarts(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	pems := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := LoadOrCreateAuthority(dir)
			errs[i] = err
			if err == nil {
				pems[i] = a.CertPEM()
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if !bytes.Equal(pems[i], pems[0]) {
			t.Fatalf("start %d got a different authority than start 0", i)
		}
	}
}

func TestAuthorityHalfWrittenIsWorded(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreateAuthority(dir)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("remove ca.crt and ca.key")) {
		t.Errorf("a corrupt authority gave %v, want a sentence saying to remove both files", err)
	}
}

func TestLeafCertificates(t *testing.T) {
	_, a := authorities(t)
	roots := pool(a)
	for _, host := range []string{"pypi.test", "127.0.0.1", "::1"} {
		c, err := a.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		leaf := c.Leaf
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("the leaf for %s does not verify for that host: %v", host, err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: roots}); err == nil {
			t.Errorf("the leaf for %s verifies for other.test too", host)
		}
		key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
		if !ok || key.Curve != elliptic.P256() {
			t.Errorf("the leaf for %s has key %T, want ECDSA P-256", host, c.PrivateKey)
		}
		if life := time.Until(leaf.NotAfter); life > leafLifetime || life < leafLifetime-2*time.Hour {
			t.Errorf("the leaf for %s expires in %s, want about %s", host, life, leafLifetime)
		}
		again, _ := a.Leaf(host)
		if again != c {
			t.Errorf("the leaf for %s was signed anew instead of cached", host)
		}
	}
}
