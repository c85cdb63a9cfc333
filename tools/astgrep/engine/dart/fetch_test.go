package dart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fetch script refuses a tarball that is not the pinned one and
// extracts nothing; the pin it holds is the one this package states.
func TestFetchScriptRefusesATarballOfAnotherIntegrity(t *testing.T) {
	script, err := os.ReadFile("../../../../scripts/fetch-dart-grammar.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"version=" + Version + "\n", "integrity=" + Integrity + "\n"} {
		if !strings.Contains(string(script), want) {
			t.Errorf("scripts/fetch-dart-grammar.sh lacks %q: the pin differs from package dart's", strings.TrimSpace(want))
		}
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "scripts", "fetch.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(root, "other.tgz")
	if err := os.WriteFile(bad, []byte("not the package"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "fetch.sh"))
	cmd.Env = append(os.Environ(), "DART_GRAMMAR_TARBALL="+bad)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the script accepted a foreign tarball: %s", out)
	}
	if !strings.Contains(string(out), "does not match the pinned integrity "+Integrity) {
		t.Errorf("output: %s", out)
	}
	if _, err := os.Stat(filepath.Join(root, ".cache", "tree-sitter-dart-"+Version)); !os.IsNotExist(err) {
		t.Errorf("something was extracted: %v", err)
	}
}
