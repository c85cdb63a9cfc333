package egresstest

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenSSL's strict checks (which Python 3.13 turns on for every HTTPS
// connection) accept the CA and a server certificate for a name and an
// address, and reject the certificate for another name.
func TestCAStrictVerify(t *testing.T) {
	openssl := need(t, "openssl")
	ca := NewCA(t)
	leaf, err := ca.Leaf("pypi.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "leaf.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o644); err != nil {
		t.Fatal(err)
	}
	env := hostEnv(t)
	for _, check := range [][]string{{"-verify_hostname", "pypi.test"}, {"-verify_ip", "127.0.0.1"}} {
		args := append([]string{"verify", "-x509_strict", "-purpose", "sslserver", "-CAfile", ca.PEMFile()}, check...)
		if out := run(t, "", env, openssl, append(args, file)...); !strings.Contains(out, ": OK") {
			t.Errorf("openssl %v: %s", args, out)
		}
	}
	stdout, stderr, err := runErr("", env, openssl, "verify", "-x509_strict", "-CAfile", ca.PEMFile(), "-verify_hostname", "other.test", file)
	if err == nil {
		t.Errorf("openssl accepted the certificate for other.test: %s%s", stdout, stderr)
	}
	if _, err := NewCA(t).Leaf(); err == nil || !strings.Contains(err.Error(), "at least one name") {
		t.Errorf("a certificate without names: %v, want an error asking for a name", err)
	}
}
