package api

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestTokenAuth(t *testing.T) {
	a, err := ParseTenantToken("acme", strings.ToUpper(HashToken("s3cret")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ParseTenantToken("beta", HashToken("other"))
	auth := NewTokenAuth(a, b)
	for tok, want := range map[string]string{"s3cret": "acme", "other": "beta", "": "", "s3cret ": "", "S3CRET": ""} {
		got, ok := auth.Authenticate(tok)
		if got != want || ok != (want != "") {
			t.Errorf("Authenticate(%q) = %q, %v; want %q", tok, got, ok, want)
		}
	}
	if _, err := ParseTenantToken("x", "abcd"); err == nil {
		t.Error("short hash accepted")
	}
	if _, err := ParseTenantToken("x", strings.Repeat("zz", 32)); err == nil {
		t.Error("non-hex hash accepted")
	}
}

func TestAdminTokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tok, path, created, err := LoadOrCreateAdminToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !created || path != filepath.Join(dir, "token") || len(tok) < 40 {
		t.Fatalf("first start: %q %q %v", tok, path, created)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %o, want 600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != tok {
		t.Errorf("file holds %q, want %q", b, tok)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("data dir holds %d entries, want only the token", len(ents))
	}

	// A later start reuses it.
	tok2, _, created, err := LoadOrCreateAdminToken(dir)
	if err != nil || created || tok2 != tok {
		t.Errorf("second start: %q %v %v, want the same token", tok2, created, err)
	}
	// A file others could read is restricted before use.
	os.Chmod(path, 0o644)
	if _, _, _, err := LoadOrCreateAdminToken(dir); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after reuse = %o", fi.Mode().Perm())
	}
	// An empty file is an error that says what to do.
	os.WriteFile(path, []byte("\n"), 0o600)
	if _, _, _, err := LoadOrCreateAdminToken(dir); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("empty token file: %v", err)
	}
}

// Two starts racing on a fresh data dir agree on one token.
func TestAdminTokenRace(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, _, _, err := LoadOrCreateAdminToken(dir)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		}()
	}
	wg.Wait()
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatalf("tokens differ: %v", toks)
		}
	}
}
