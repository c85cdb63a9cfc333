package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadCapsAndErrors(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"big.txt": strings.Repeat("x", 1000), "small.txt": "abc"})
	os.Symlink("small.txt", filepath.Join(root, "link"))

	r, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "big.txt", MaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Data) != 100 || r.Size != 1000 || !r.Truncated {
		t.Fatalf("capped read: len %d size %d truncated %v", len(r.Data), r.Size, r.Truncated)
	}
	_, err = c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "missing.txt"})
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("missing file: %v", err)
	}
	_, err = c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "../../etc/passwd"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("escape: %v", err)
	}
	_, err = c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "."})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory read: %v", err)
	}

	st, err := c.Stat(ctx, &proto.StatRequest{Root: root, Path: "link"})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Symlink || st.Size != 3 || st.IsDir {
		t.Fatalf("stat link = %+v", st)
	}

	rs, err := c.ReadFiles(ctx, &proto.ReadFilesRequest{Root: root, Paths: []string{"small.txt", "big.txt", "nope", "/etc/passwd", "small.txt"}, MaxBytesEach: 500, MaxTotal: 4})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rs.Files {
		got = append(got, f.Path+":"+string(f.Data)+":"+f.Skipped)
	}
	want := []string{"small.txt:abc:", "big.txt::too large", "nope::not found", "", "small.txt::over total cap"}
	for i := range want {
		if i == 3 {
			if !strings.Contains(got[3], "outside the workspace") {
				t.Errorf("escape entry = %q", got[3])
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("entry %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestWriteThroughSymlinkOutIsRefused(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("keep"), 0o644)
	os.Symlink(secret, filepath.Join(root, "out"))
	os.Symlink(outside, filepath.Join(root, "outdir"))
	for _, p := range []string{"out", "outdir/new.txt"} {
		err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: p, Data: []byte("pwned"), MkdirAll: true}}})
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), p) {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "keep" {
		t.Fatalf("outside file changed to %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Fatal("a file was created outside the root")
	}
	// The same batch with only good paths lands.
	if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "ok.txt", Data: []byte("fine")}}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ok.txt")); string(b) != "fine" {
		t.Fatalf("ok.txt = %q", b)
	}
}

func TestWalkWithGitignore(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		".gitignore":                "*.log\nbuild/\n!keep.log\n/only-top.txt\n",
		"main.go":                   "package main",
		"debug.log":                 "x",
		"keep.log":                  "x",
		"only-top.txt":              "x",
		"src/only-top.txt":          "x",
		"build/out.bin":             "x",
		"src/a.go":                  "x",
		"src/.gitignore":            "secret*\n",
		"src/secret.go":             "x",
		"src/build/gen.go":          "x",
		".git/config":               "x",
		"node_modules/pkg/index.js": "x",
		"big.dat":                   strings.Repeat("b", 5000),
	})
	names := func(r *proto.WalkResponse) []string {
		var out []string
		for _, f := range r.Files {
			out = append(out, f.Path)
		}
		slices.Sort(out)
		return out
	}
	r, err := c.Walk(ctx, &proto.WalkRequest{Root: root, Gitignore: true, MaxSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "keep.log", "main.go", "src/.gitignore", "src/a.go", "src/only-top.txt"}
	if got := names(r); !slices.Equal(got, want) {
		t.Fatalf("walk with gitignore = %v\nwant %v", got, want)
	}

	r, err = c.Walk(ctx, &proto.WalkRequest{Root: root, Path: "src", Gitignore: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(r), []string{".gitignore", "a.go", "only-top.txt"}; !slices.Equal(got, want) {
		t.Fatalf("walk of src = %v, want %v (parent .gitignore applies)", got, want)
	}

	r, err = c.Walk(ctx, &proto.WalkRequest{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	got := names(r)
	if slices.Contains(got, ".git/config") || slices.Contains(got, "node_modules/pkg/index.js") || !slices.Contains(got, "debug.log") {
		t.Fatalf("walk without gitignore = %v", got)
	}

	r, err = c.Walk(ctx, &proto.WalkRequest{Root: root, MaxEntries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Files) != 3 || !r.Truncated {
		t.Fatalf("capped walk: %d files, truncated %v", len(r.Files), r.Truncated)
	}

	_, err = c.Walk(ctx, &proto.WalkRequest{Root: root, Path: "main.go"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("walk of a file: %v", err)
	}
}

// walk lists a symlink to a file inside the root (as a symlink, with the
// target's size), leaves out one that points outside, never enters a
// symlinked directory, and reports each file's size and mtime.
func TestWalkSymlinksSizesAndTimes(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	root, outside := t.TempDir(), t.TempDir()
	writeTree(t, root, map[string]string{"a/file.txt": "twelve bytes", "b/x.go": "x"})
	writeTree(t, outside, map[string]string{"secret.txt": "secret"})
	for link, target := range map[string]string{
		"in-link":  filepath.Join(root, "a/file.txt"),
		"out-link": filepath.Join(outside, "secret.txt"),
		"dir-link": filepath.Join(root, "b"),
		"out-dir":  outside,
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(root, "a/file.txt"), when, when); err != nil {
		t.Fatal(err)
	}
	r, err := c.Walk(ctx, &proto.WalkRequest{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]proto.FileInfo{}
	for _, f := range r.Files {
		got[f.Path] = f
	}
	if len(got) != 3 {
		t.Errorf("walk listed %v, want a/file.txt, b/x.go and in-link only", r.Files)
	}
	if f := got["a/file.txt"]; f.Size != 12 || !f.ModTime.Equal(when) || f.Symlink {
		t.Errorf("a/file.txt = %+v, want 12 bytes, mtime %v, not a symlink", f, when)
	}
	if f, ok := got["in-link"]; !ok || !f.Symlink || f.Size != 12 {
		t.Errorf("in-link = %+v (listed %v), want the target's 12 bytes, marked a symlink", f, ok)
	}
}
