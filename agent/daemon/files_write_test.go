package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// snapshotTree maps every path under root to its contents ("<dir>" for dirs).
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if fi.IsDir() {
			out[rel] = "<dir>"
			return nil
		}
		b, _ := os.ReadFile(p)
		out[rel] = string(b) + "|" + fi.Mode().Perm().String()
		return nil
	})
	return out
}

func writeFixture(t *testing.T) string {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("old a"), 0o600)
	os.WriteFile(filepath.Join(root, "b.txt"), []byte("old b"), 0o644)
	os.WriteFile(filepath.Join(root, "gone.txt"), []byte("to delete"), 0o644)
	os.WriteFile(filepath.Join(root, "plainfile"), []byte("not a dir"), 0o644)
	return root
}

func TestWriteFilesRollbackMidway(t *testing.T) {
	root := writeFixture(t)
	before := snapshotTree(t, root)
	req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
		{Path: "a.txt", Data: []byte("new a")},
		{Path: "gone.txt", Delete: true},
		{Path: "new/dir/c.txt", Data: []byte("c"), MkdirAll: true},
		{Path: "b.txt", Data: []byte("new b")},
	}}
	// Fail after three entries were renamed into place.
	hook := func(i int) error {
		if i == 3 {
			return errdefs.Internal("injected failure before entry %d", i)
		}
		return nil
	}
	err := writeFiles(req, commitEnv{hook: hook})
	if err == nil {
		t.Fatal("writeFiles succeeded despite the injected failure")
	}
	after := snapshotTree(t, root)
	if !maps.Equal(before, after) {
		t.Fatalf("tree changed after a failed batch:\nbefore %v\nafter  %v", before, after)
	}
}

func TestWriteFilesParentIsFileLeavesAllAsBefore(t *testing.T) {
	root := writeFixture(t)
	before := snapshotTree(t, root)
	req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
		{Path: "a.txt", Data: []byte("new a")},
		{Path: "fresh.txt", Data: []byte("fresh")},
		{Path: "plainfile/child.txt", Data: []byte("x"), MkdirAll: true},
	}}
	err := writeFiles(req, commitEnv{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want invalid_argument", err)
	}
	if after := snapshotTree(t, root); !maps.Equal(before, after) {
		t.Fatalf("tree changed:\nbefore %v\nafter  %v", before, after)
	}
}

func TestWriteFilesCommits(t *testing.T) {
	root := writeFixture(t)
	sum := sha256.Sum256([]byte("old b"))
	req := &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
		{Path: "a.txt", Data: []byte("new a")},
		{Path: "b.txt", Data: []byte("new b"), ExpectSHA256: hex.EncodeToString(sum[:])},
		{Path: "gone.txt", Delete: true},
		{Path: "x/y/z.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755, MkdirAll: true, ExpectAbsent: true},
	}}
	if err := writeFiles(req, commitEnv{}); err != nil {
		t.Fatal(err)
	}
	got := snapshotTree(t, root)
	want := map[string]string{
		"a.txt":     "new a|-rw-------", // mode kept
		"b.txt":     "new b|-rw-r--r--",
		"plainfile": "not a dir|-rw-r--r--",
		"x":         "<dir>",
		"x/y":       "<dir>",
		"x/y/z.sh":  "#!/bin/sh\n|-rwxr-xr-x",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("tree = %v\nwant %v", got, want)
	}
}

func TestWriteFilesExpectations(t *testing.T) {
	root := writeFixture(t)
	before := snapshotTree(t, root)
	cases := []struct {
		name  string
		files []proto.WriteFile
		class error
	}{
		{"sha mismatch", []proto.WriteFile{{Path: "a.txt", Data: []byte("x")}, {Path: "b.txt", Data: []byte("y"), ExpectSHA256: "00"}}, errdefs.ErrFailedPrecondition},
		{"expect absent but exists", []proto.WriteFile{{Path: "b.txt", Data: []byte("y"), ExpectAbsent: true}}, errdefs.ErrFailedPrecondition},
		{"delete missing", []proto.WriteFile{{Path: "nope.txt", Delete: true}}, errdefs.ErrNotFound},
		{"missing parent without mkdir", []proto.WriteFile{{Path: "a.txt", Data: []byte("x")}, {Path: "no/such.txt", Data: []byte("y")}}, errdefs.ErrNotFound},
		{"duplicate", []proto.WriteFile{{Path: "a.txt"}, {Path: "./a.txt"}}, errdefs.ErrInvalidArgument},
		{"escape", []proto.WriteFile{{Path: "a.txt", Data: []byte("x")}, {Path: "../evil.txt"}}, errdefs.ErrInvalidArgument},
		{"directory target", []proto.WriteFile{{Path: ".", Data: []byte("x")}}, errdefs.ErrInvalidArgument},
		{"empty batch", nil, errdefs.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := writeFiles(&proto.WriteFilesRequest{Root: root, Files: tc.files}, commitEnv{})
			if !errors.Is(err, tc.class) {
				t.Fatalf("err = %v (%s), want %v", err, errdefs.Code(err), tc.class)
			}
			if after := snapshotTree(t, root); !maps.Equal(before, after) {
				t.Fatalf("tree changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
