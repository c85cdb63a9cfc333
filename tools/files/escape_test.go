package files_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPathEscapes tries the ways out of the workspace through every file
// tool; each must be refused with an error message saying so, and nothing
// outside the workspace may be read or written.
func TestPathEscapes(t *testing.T) {
	s := newSandbox(t)
	secret := filepath.Join(s.outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"link_root":     "/",
		"link_out_dir":  s.outside,
		"link_out_file": secret,
		"link_rel_out":  "../outside/secret.txt",
		"dangling_out":  filepath.Join(s.outside, "created-by-dangling.txt"),
		"sub/up":        "..", // stays inside: sub/up is the workspace
		"sub/upup":      "../..",
	}
	s.put("sub/in.txt", "inside\n")
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(s.ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	rel := "../outside/secret.txt"
	const outsideMsg = "outside the workspace"
	const leaves = "leaves the workspace"
	const viaLink = "leads through a symlink"
	patchFor := func(path string) string {
		return "--- a/" + path + "\n+++ b/" + path + "\n@@ -1 +1 @@\n-SECRET\n+PWNED\n"
	}
	cases := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"read dot-dot", "read", map[string]any{"path": rel}, leaves},
		{"read deep dot-dot", "read", map[string]any{"path": "sub/../../outside/secret.txt"}, leaves},
		{"read absolute /etc/passwd", "read", map[string]any{"path": "/etc/passwd"}, outsideMsg},
		{"read absolute outside", "read", map[string]any{"path": secret}, outsideMsg},
		{"read via symlink to /", "read", map[string]any{"path": "link_root/etc/passwd"}, viaLink},
		{"read via symlinked dir out", "read", map[string]any{"path": "link_out_dir/secret.txt"}, viaLink},
		{"read symlinked file out", "read", map[string]any{"path": "link_out_file"}, viaLink},
		{"read relative symlink out", "read", map[string]any{"path": "link_rel_out"}, viaLink},
		{"read through ../.. link", "read", map[string]any{"path": "sub/upup/outside/secret.txt"}, viaLink},
		{"read tilde", "read", map[string]any{"path": "~/.ssh/id_rsa"}, "uses ~"},
		{"read NUL byte", "read", map[string]any{"path": "sub/in.txt\x00../../x"}, "NUL byte"},
		{"write dot-dot", "write", map[string]any{"path": "../outside/new.txt", "content": "x"}, leaves},
		{"write dangling symlink out", "write", map[string]any{"path": "dangling_out", "content": "x"}, viaLink},
		{"write through symlinked file", "write", map[string]any{"path": "link_out_file", "content": "PWNED"}, viaLink},
		{"write into symlinked dir", "write", map[string]any{"path": "link_out_dir/new.txt", "content": "x"}, viaLink},
		{"write new dirs under symlinked dir", "write", map[string]any{"path": "link_out_dir/a/b/c.txt", "content": "x"}, viaLink},
		{"write absolute outside", "write", map[string]any{"path": filepath.Join(s.outside, "abs.txt"), "content": "x"}, outsideMsg},
		{"edit symlinked file", "edit", map[string]any{"path": "link_out_file", "old": "SECRET", "new": "PWNED"}, viaLink},
		{"edit dot-dot", "edit", map[string]any{"path": rel, "old": "SECRET", "new": "PWNED"}, leaves},
		{"patch dot-dot", "apply_patch", map[string]any{"patch": patchFor("../outside/secret.txt")}, leaves},
		{"patch via symlink", "apply_patch", map[string]any{"patch": patchFor("link_out_file")}, viaLink},
		{"patch create in symlinked dir", "apply_patch", map[string]any{"patch": "--- /dev/null\n+++ b/link_out_dir/p.txt\n@@ -0,0 +1 @@\n+x\n"}, viaLink},
		{"patch delete via symlink", "apply_patch", map[string]any{"patch": "--- a/link_out_file\n+++ /dev/null\n@@ -1 +0,0 @@\n-SECRET\n"}, viaLink},
		{"patch absolute", "apply_patch", map[string]any{"patch": "--- " + secret + "\n+++ " + secret + "\n@@ -1 +1 @@\n-SECRET\n+PWNED\n"}, outsideMsg},
		{"shell workdir dot-dot", "shell", map[string]any{"command": "touch escaped.txt", "workdir": "../outside"}, leaves},
		{"shell workdir absolute", "shell", map[string]any{"command": "touch escaped.txt", "workdir": s.outside}, outsideMsg},
		{"shell workdir symlinked dir", "shell", map[string]any{"command": "touch escaped.txt", "workdir": "link_out_dir"}, viaLink},
		{"shell workdir symlink to /", "shell", map[string]any{"command": "touch escaped.txt", "workdir": "link_root/tmp"}, viaLink},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := s.bad(c.tool, c.args, c.want)
			if strings.Contains(text, "SECRET") {
				t.Fatalf("the secret leaked: %q", text)
			}
		})
	}
	// A symlink that stays inside is fine.
	if got := s.ok("read", map[string]any{"path": "sub/up/sub/in.txt"}); !strings.Contains(got, "inside") {
		t.Fatalf("inside link: %q", got)
	}
	// Nothing outside changed.
	b, err := os.ReadFile(secret)
	if err != nil || string(b) != "SECRET\n" {
		t.Fatalf("secret changed: %q %v", b, err)
	}
	entries, _ := os.ReadDir(s.outside)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"secret.txt"}) {
		t.Fatalf("files appeared outside the workspace: %v", names)
	}
	parent, _ := os.ReadDir(filepath.Dir(s.ws))
	if len(parent) != 2 {
		t.Fatalf("files appeared beside the workspace: %v", parent)
	}
	if len(s.written) != 0 {
		t.Fatalf("AfterWrite was called for refused writes: %v", s.written)
	}
}
