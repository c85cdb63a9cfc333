package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// confineFixture builds a root with every kind of symlink trick next to an
// "outside" directory, and a symlink to the root itself.
func confineFixture(t *testing.T) (root, realRoot, outside string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	realRoot = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(realRoot, "dir"), 0o755))
	must(os.MkdirAll(outside, 0o755))
	must(os.WriteFile(filepath.Join(realRoot, "a.txt"), []byte("a"), 0o644))
	must(os.WriteFile(filepath.Join(realRoot, "dir", "b.txt"), []byte("b"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	links := map[string]string{
		"linkout":    "/",
		"linkin":     "dir",
		"chain1":     "chain2",
		"chain2":     "chain3",
		"chain3":     "/etc",
		"dirout":     outside,
		"dangling":   "/nonexistent-sandboxd-test/xyz",
		"danglingin": "missing.txt",
		"fileout":    filepath.Join(outside, "secret.txt"),
		"loop1":      "loop2",
		"loop2":      "loop1",
		"relout":     "../outside",
		"dir/up":     "..",
		"dir/upup":   "../..",
		"absin":      filepath.Join(realRoot, "dir"),
	}
	for name, target := range links {
		must(os.Symlink(target, filepath.Join(realRoot, name)))
	}
	root = filepath.Join(base, "rootlink")
	must(os.Symlink(realRoot, root))
	return root, realRoot, outside
}

func TestConfineTricks(t *testing.T) {
	root, realRoot, outside := confineFixture(t)
	ok := func(rel string) string { return filepath.Join(realRoot, rel) }
	cases := []struct {
		name, path string
		want       string // resolved path; "" means refused
	}{
		{"plain relative", "a.txt", ok("a.txt")},
		{"nested", "dir/b.txt", ok("dir/b.txt")},
		{"empty is the root", "", realRoot},
		{"dot is the root", ".", realRoot},
		{"dotdot inside", "dir/../a.txt", ok("a.txt")},
		{"new file in new dirs", "new/deep/file.txt", ok("new/deep/file.txt")},
		{"absolute via root symlink", filepath.Join(root, "a.txt"), ok("a.txt")},
		{"absolute via real root", filepath.Join(realRoot, "dir/b.txt"), ok("dir/b.txt")},
		{"symlink to a dir inside", "linkin/b.txt", ok("dir/b.txt")},
		{"absolute symlink inside", "absin/b.txt", ok("dir/b.txt")},
		{"dangling symlink inside", "danglingin", ok("missing.txt")},
		{"symlink to parent inside", "dir/up/a.txt", ok("a.txt")},
		{"below a file", "a.txt/x", ok("a.txt/x")},

		{"parent", "../x", ""},
		{"bare dotdot", "..", ""},
		{"dotdot after a dir", "a/../../x", ""},
		{"dotdot to root", "dir/../../", ""},
		{"absolute elsewhere", "/etc/passwd", ""},
		{"double slash", "//etc", ""},
		{"filesystem root", "/", ""},
		{"absolute sibling with root prefix", realRoot + "-evil/x", ""},
		{"symlink to /", "linkout/etc/passwd", ""},
		{"symlink to / itself", "linkout", ""},
		{"symlink chain out", "chain1/passwd", ""},
		{"symlinked dir escaping, new file", "dirout/new.txt", ""},
		{"dangling symlink out", "dangling", ""},
		{"below a dangling symlink out", "dangling/more", ""},
		{"NUL byte", "a\x00b", ""},
		{"tilde", "~", ""},
		{"tilde path", "~/.ssh/id_rsa", ""},
		{"writing through a symlink out", "fileout", ""},
		{"symlink loop", "loop1", ""},
		{"relative symlink out", "relout/secret.txt", ""},
		{"symlink to grandparent", "dir/upup/outside/secret.txt", ""},
		{"absolute through symlink out", filepath.Join(root, "dirout/secret.txt"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := confine(root, tc.path)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("confine(%q) = %s, want refusal", tc.path, c.abs)
				}
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("confine(%q) error class = %s, want invalid_argument: %v", tc.path, errdefs.Code(err), err)
				}
				if strings.Contains(err.Error(), outside) && !strings.Contains(err.Error(), "symlink") {
					t.Errorf("error leaks without saying why: %v", err)
				}
				if tc.path != "" && !strings.Contains(err.Error(), "path ") {
					t.Errorf("error does not name the path: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("confine(%q): %v", tc.path, err)
			}
			if c.abs != tc.want {
				t.Fatalf("confine(%q) = %s, want %s", tc.path, c.abs, tc.want)
			}
		})
	}
}

func TestConfineRoot(t *testing.T) {
	for _, root := range []string{"", "relative/root", "/nonexistent-sandboxd-root", "/etc/passwd", "/tmp\x00x"} {
		if _, err := confine(root, "a"); err == nil {
			t.Errorf("confine with root %q succeeded, want an error", root)
		}
	}
}
