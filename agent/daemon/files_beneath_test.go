package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// swapFixture: root/sub/f.txt inside the workspace, and outside/f.txt
// holding a secret beside it.
func swapFixture(t *testing.T) (root, outside string) {
	t.Helper()
	if !haveOpenat2() {
		t.Skip("openat2 is not available here: opens fall back to the checked path")
	}
	base := t.TempDir()
	root, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "sub", "f.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "f.txt"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

// swap replaces root/sub by a symlink to outside, as a process in the
// sandbox could between the check and the open.
func swap(t *testing.T, root, outside string) {
	t.Helper()
	if err := os.Rename(filepath.Join(root, "sub"), filepath.Join(root, "sub-moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "sub")); err != nil {
		t.Fatal(err)
	}
}

// A directory swapped for a symlink after confine checked the path: the
// open fails with an error message saying to retry, and never reads outside.
func TestReadAfterSwapRefused(t *testing.T) {
	root, outside := swapFixture(t)
	c, err := confine(root, "sub/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	swap(t, root, outside)
	f, err := openBeneath(c.root, c.abs, "sub/f.txt", os.O_RDONLY, 0)
	if err == nil {
		f.Close()
		t.Fatal("the open followed the swapped-in symlink")
	}
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "changed while it was being opened") {
		t.Errorf("err = %v, want failed_precondition saying the path changed", err)
	}
	// The batch read says the same per file, and holds no data.
	got, err := readFiles(&proto.ReadFilesRequest{Root: root, Paths: []string{"sub-moved/f.txt"}}, readLimits{})
	if err != nil || string(got.Files[0].Data) != "inside\n" {
		t.Fatalf("reading the moved file = %+v, %v", got, err)
	}
	var fd proto.FileData
	fd.Path = "sub/f.txt"
	r, err := openRoot(c.root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if why := readOne(r, c, 1<<20, 1<<20, readLimits{}, &fd); why == "" || fd.Data != nil {
		t.Errorf("readOne after the swap = %q with %q, want a reason and no data", why, fd.Data)
	}
}

// A swap after the batch staged its files (the hook runs before each
// commit): the new content lands in the directory that was checked, now
// moved, and nothing is written outside.
func TestWriteAfterSwapStaysInside(t *testing.T) {
	root, outside := swapFixture(t)
	hook := func(i int) error {
		if i == 0 {
			swap(t, root, outside)
		}
		return nil
	}
	err := writeFiles(&proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
		{Path: "sub/f.txt", Data: []byte("new\n")},
		{Path: "sub/g.txt", Data: []byte("g\n")},
	}}, commitEnv{hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "f.txt")); string(b) != "secret\n" {
		t.Errorf("outside/f.txt = %q, want it untouched", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "g.txt")); err == nil {
		t.Error("a file was created outside the workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sub-moved", "f.txt")); string(b) != "new\n" {
		t.Errorf("the checked directory's f.txt = %q, want the new content", b)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "sub-moved"))
	if len(ents) != 2 {
		t.Errorf("the checked directory holds %d entries, want f.txt and g.txt only (no staged or backup file left)", len(ents))
	}
}

// mkdir_all through a parent swapped for a symlink after the check cannot
// create directories outside.
func TestMkdirAllRefusesSwappedParent(t *testing.T) {
	root, outside := swapFixture(t)
	c, err := confine(root, "sub/a/b/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	swap(t, root, outside)
	_, err = mkdirAll(c.root, filepath.Dir(c.abs), "sub/a/b/f.txt", nil)
	if err == nil || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("mkdirAll after the swap = %v, want failed_precondition", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "a")); err == nil {
		t.Error("a directory was created outside the workspace")
	}
}

// Without openat2 (gVisor, kernels before 5.6) mkdir_all still makes the
// missing directories one name at a time, and a symlink in place of one it
// just made is not followed.
func TestMkdirAllWithoutOpenat2(t *testing.T) {
	saved := haveOpenat2
	haveOpenat2 = func() bool { return false }
	t.Cleanup(func() { haveOpenat2 = saved })
	root := t.TempDir()
	made, err := mkdirAll(root, filepath.Join(root, "a", "b", "c"), "a/b/c/f.txt", nil)
	if err != nil || len(made) != 3 {
		t.Fatalf("mkdirAll = %v, %v; want a, a/b and a/b/c made", made, err)
	}
	if st, err := os.Stat(filepath.Join(root, "a", "b", "c")); err != nil || !st.IsDir() {
		t.Fatalf("a/b/c: %v", err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "a", "link")); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(filepath.Join(root, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if f, err := openatBeneath(int(d.Fd()), "link", filepath.Join(root, "a", "link"), "a/link", os.O_RDONLY, 0); err == nil {
		f.Close()
		t.Fatal("a symlink was followed without openat2")
	}
	if _, err := openatBeneath(int(d.Fd()), "b/c", filepath.Join(root, "a", "b", "c"), "a/b/c", os.O_RDONLY, 0); err == nil {
		t.Fatal("a path of two names was resolved without openat2")
	}
}
