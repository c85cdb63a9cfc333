package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// owner is a path's uid, gid and permission bits, as ls -ln shows them.
type owner struct {
	uid, gid int
	perm     os.FileMode
}

func ownerOf(t *testing.T, path string) owner {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return owner{int(st.Uid), int(st.Gid), fi.Mode().Perm()}
}

// filePairs runs a test against a daemon with a commit journal (as in a
// sandbox) and one without.
func filePairs(t *testing.T, run func(t *testing.T, c *agent.Client)) {
	t.Run("journal", func(t *testing.T) {
		_, c := startPair(t, daemon.WithStateDir(t.TempDir()))
		run(t, c)
	})
	t.Run("no journal", func(t *testing.T) {
		_, c := startPair(t)
		run(t, c)
	})
}

// A write for an account gives it every file the write creates and every
// directory made for them, with the usual modes; a file that existed keeps
// its owner (and mode), and the workspace itself is left as it was. The
// account can then work in what was made for it.
func TestWriteFilesOwner(t *testing.T) {
	nb := nobody(t)
	uid, _ := strconv.Atoi(nb.Uid)
	gid, _ := strconv.Atoi(nb.Gid)
	filePairs(t, func(t *testing.T, c *agent.Client) {
		root := openDir(t)
		for _, f := range []string{"kept.txt", "theirs.txt"} {
			if err := os.WriteFile(filepath.Join(root, f), []byte("old"), 0o640); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(filepath.Join(root, "theirs.txt"), 1234, 4321); err != nil {
			t.Fatal(err)
		}
		err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Owner: "nobody", Files: []proto.WriteFile{
			{Path: "a/b/new.txt", Data: []byte("new"), MkdirAll: true},
			{Path: "top.txt", Data: []byte("top")},
			{Path: "kept.txt", Data: []byte("replaced")},
			{Path: "theirs.txt", Data: []byte("replaced")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]owner{
			"":            {0, 0, 0o755},
			"a":           {uid, gid, 0o755},
			"a/b":         {uid, gid, 0o755},
			"a/b/new.txt": {uid, gid, 0o644},
			"top.txt":     {uid, gid, 0o644},
			"kept.txt":    {0, 0, 0o640},
			"theirs.txt":  {1234, 4321, 0o640},
		} {
			if got := ownerOf(t, filepath.Join(root, path)); got != want {
				t.Errorf("%q after a write for nobody: uid %d gid %d mode %v; want uid %d gid %d mode %v", path, got.uid, got.gid, got.perm, want.uid, want.gid, want.perm)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(root, "theirs.txt")); string(b) != "replaced" {
			t.Errorf("theirs.txt holds %q", b)
		}
		resp, err := c.Exec(testCtx(t), &proto.ExecRequest{User: "nobody", Dir: filepath.Join(root, "a/b"), Argv: []string{"sh", "-c", "echo more >> new.txt && mkdir c && echo ok"}})
		if err != nil || resp.ExitCode != 0 || string(resp.Stdout) != "ok\n" {
			t.Errorf("nobody working in what was written for it: %+v, %v", resp, err)
		}

		// Without an owner, a new file is the agent's, as before.
		if err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "a/root.txt", Data: []byte("r")}}}); err != nil {
			t.Fatal(err)
		}
		if got := ownerOf(t, filepath.Join(root, "a/root.txt")); got != (owner{0, 0, 0o644}) {
			t.Errorf("a file written without an owner: %+v; want root's, 0644", got)
		}
	})
}

// An account given by uid is the same account.
func TestWriteFilesOwnerByUID(t *testing.T) {
	nb := nobody(t)
	_, c := startPair(t)
	root := t.TempDir()
	if err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Owner: nb.Uid, Files: []proto.WriteFile{{Path: "f", Data: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	if got := ownerOf(t, filepath.Join(root, "f")); strconv.Itoa(got.uid) != nb.Uid || strconv.Itoa(got.gid) != nb.Gid {
		t.Fatalf("a file written for uid %s: %+v", nb.Uid, got)
	}
}

// A write for an account the sandbox does not have is refused, and
// nothing of it is made.
func TestWriteFilesUnknownOwner(t *testing.T) {
	_, c := startPair(t)
	root := t.TempDir()
	err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Owner: "no-such-user-e2b", Files: []proto.WriteFile{{Path: "d/f", Data: []byte("x"), MkdirAll: true}}})
	want := `user "no-such-user-e2b" does not exist in the sandbox; give an account of its /etc/passwd (or none for root)`
	if !errors.Is(err, errdefs.ErrNotFound) || err.Error() != want {
		t.Fatalf("write_files for an unknown user: %v; want the not_found %q", err, want)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("the refused write left %v", ents)
	}
}

// needUserXattrs skips a test when dir's file system keeps no user
// extended attributes (saying so), and fails it on any other error.
func needUserXattrs(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(probe)
	err := syscall.Setxattr(probe, "user.probe", []byte("1"), 0)
	if errors.Is(err, syscall.ENOTSUP) {
		t.Skipf("the file system of %s keeps no user extended attributes", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Attributes written with a file are read back by the xattrs op, by
// prefix; a path without any, a missing one, a symlink (whose own
// attributes are read, not its target's) and a directory are left out.
func TestXattrsWrittenAreReadBack(t *testing.T) {
	filePairs(t, func(t *testing.T, c *agent.Client) {
		root := t.TempDir()
		needUserXattrs(t, root)
		note := "line one\nline \"two\" <b>&</b>\u2028 \\ é"
		err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
			{Path: "d/meta.txt", Data: []byte("data"), MkdirAll: true, Xattrs: map[string]string{"user.e2b.owner": "alice", "user.e2b.note": note, "user.other": "x"}},
			{Path: "plain.txt", Data: []byte("plain")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		meta, plain := filepath.Join(root, "d/meta.txt"), filepath.Join(root, "plain.txt")
		if b, _ := os.ReadFile(meta); string(b) != "data" {
			t.Fatalf("meta.txt holds %q", b)
		}
		link := filepath.Join(root, "link")
		if err := os.Symlink(meta, link); err != nil {
			t.Fatal(err)
		}
		paths := []string{meta, plain, filepath.Join(root, "missing"), link, filepath.Join(root, "d"), meta}
		resp, err := c.Xattrs(testCtx(t), &proto.XattrsRequest{Paths: paths, Prefix: "user.e2b."})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Attrs) != 1 || len(resp.Attrs[meta]) != 2 || resp.Attrs[meta]["user.e2b.owner"] != "alice" || resp.Attrs[meta]["user.e2b.note"] != note {
			t.Fatalf("xattrs of %q under user.e2b.: %q; want only meta.txt's two", paths, resp.Attrs)
		}
		resp, err = c.Xattrs(testCtx(t), &proto.XattrsRequest{Paths: []string{meta}, Prefix: "user."})
		if err != nil || len(resp.Attrs[meta]) != 3 || resp.Attrs[meta]["user.other"] != "x" {
			t.Fatalf("xattrs under user.: %q, %v; want all three", resp.Attrs, err)
		}

		// New content is a new file: the attributes are the write's own.
		if err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
			{Path: "d/meta.txt", Data: []byte("data 2"), Xattrs: map[string]string{"user.e2b.owner": "bob"}},
		}}); err != nil {
			t.Fatal(err)
		}
		resp, err = c.Xattrs(testCtx(t), &proto.XattrsRequest{Paths: []string{meta}, Prefix: "user."})
		if err != nil || len(resp.Attrs[meta]) != 1 || resp.Attrs[meta]["user.e2b.owner"] != "bob" {
			t.Fatalf("xattrs after a rewrite with one attribute: %q, %v; want only it", resp.Attrs, err)
		}
	})
}

// Attributes the agent does not write, or more than it keeps, are refused
// before anything is written, each in one sentence; so are reads of other
// namespaces, relative paths and too many paths.
func TestXattrRefusals(t *testing.T) {
	_, c := startPair(t)
	root := t.TempDir()
	big := strings.Repeat("v", proto.MaxXattrValue+1)
	many := map[string]string{}
	for i := range proto.MaxXattrsPerFile + 1 {
		many["user.a"+strconv.Itoa(i)] = "1"
	}
	for _, tc := range []struct {
		f    proto.WriteFile
		want string
	}{
		{proto.WriteFile{Path: "f", Xattrs: map[string]string{"trusted.e2b": "1"}}, `extended attribute "trusted.e2b" of f is not in the user namespace; give names that begin with "user." and go on`},
		{proto.WriteFile{Path: "f", Xattrs: map[string]string{"user.": "1"}}, `extended attribute "user." of f is not in the user namespace; give names that begin with "user." and go on`},
		{proto.WriteFile{Path: "f", Xattrs: map[string]string{"user.big": big}}, `extended attribute "user.big" of f has a value of 65537 bytes; give at most 65536`},
		{proto.WriteFile{Path: "f", Xattrs: many}, `f is given 65 extended attributes; give at most 64`},
		{proto.WriteFile{Path: "f", Delete: true, Xattrs: map[string]string{"user.a": "1"}}, `f is deleted and given extended attributes; drop xattrs from a delete`},
	} {
		err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "ok", Data: []byte("x")}, tc.f}})
		if !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != tc.want {
			t.Errorf("write with %d xattrs: %v; want the invalid_argument %q", len(tc.f.Xattrs), err, tc.want)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("refused writes left %v in the workspace", ents)
	}

	for _, tc := range []struct {
		r    proto.XattrsRequest
		want string
	}{
		{proto.XattrsRequest{Paths: []string{"/"}, Prefix: "security."}, `prefix "security." does not begin with "user."; only the user namespace is read (such as "user.e2b.")`},
		{proto.XattrsRequest{Paths: []string{"/"}}, `prefix "" does not begin with "user."; only the user namespace is read (such as "user.e2b.")`},
		{proto.XattrsRequest{Paths: []string{"rel/path"}, Prefix: "user."}, `path "rel/path" is not an absolute path; give each file's full path in the sandbox`},
		{proto.XattrsRequest{Paths: make([]string, proto.MaxXattrPaths+1), Prefix: "user."}, `100001 paths were given; ask for at most 100000 at once`},
	} {
		_, err := c.Xattrs(testCtx(t), &tc.r)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != tc.want {
			t.Errorf("xattrs with prefix %q: %v; want the invalid_argument %q", tc.r.Prefix, err, tc.want)
		}
	}
}

// An answer larger than the cap, counted as JSON (where '<' takes six
// bytes), is refused with what to do, not cut short.
func TestXattrsAnswerIsCapped(t *testing.T) {
	_, c := startPair(t)
	root := t.TempDir()
	needUserXattrs(t, root)
	const files = 1000
	value := strings.Repeat("<", 3000) // 18000 bytes as JSON; 1000 of them pass 16 MiB
	var ws []proto.WriteFile
	var paths []string
	for i := range files {
		name := "f" + strconv.Itoa(i)
		ws = append(ws, proto.WriteFile{Path: name, Xattrs: map[string]string{"user.e2b.v": value}})
		paths = append(paths, filepath.Join(root, name))
	}
	if err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Files: ws}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Xattrs(testCtx(t), &proto.XattrsRequest{Paths: paths, Prefix: "user.e2b."})
	want := "the extended attributes of the 1000 paths come to more than 16 MiB; ask for fewer paths at once"
	if !errors.Is(err, errdefs.ErrResourceExhausted) || err.Error() != want {
		t.Fatalf("xattrs of %d files of %d bytes each: %v; want the resource_exhausted %q", files, len(value), err, want)
	}
	resp, err := c.Xattrs(testCtx(t), &proto.XattrsRequest{Paths: paths[:files/2], Prefix: "user.e2b."})
	if err != nil || len(resp.Attrs) != files/2 {
		t.Fatalf("xattrs of half of them: %d paths, %v", len(resp.Attrs), err)
	}
}

// On a file system that keeps no extended attributes (ramfs), a write
// with them is refused in one sentence and leaves nothing; reading them
// leaves its paths out.
func TestXattrsOnAFileSystemWithoutThem(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	if err := syscall.Mount("ramfs", root, "ramfs", 0, ""); err != nil {
		t.Skipf("cannot mount a ramfs to test on (%v)", err)
	}
	t.Cleanup(func() { syscall.Unmount(root, syscall.MNT_DETACH) })
	filePairs(t, func(t *testing.T, c *agent.Client) {
		err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{
			{Path: "d/f.txt", Data: []byte("x"), MkdirAll: true, Xattrs: map[string]string{"user.e2b.a": "1"}},
		}})
		want := "the file system at " + filepath.Join(root, "d") + " does not keep extended attributes; write without metadata"
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || err.Error() != want {
			t.Fatalf("write with xattrs on ramfs: %v; want the failed_precondition %q", err, want)
		}
		if ents, _ := os.ReadDir(root); len(ents) != 0 {
			t.Fatalf("the refused write left %v", ents)
		}
		if err := c.WriteFiles(testCtx(t), &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "g.txt", Data: []byte("x")}}}); err != nil {
			t.Fatal(err)
		}
		g := filepath.Join(root, "g.txt")
		resp, err := c.Xattrs(testCtx(t), &proto.XattrsRequest{Paths: []string{g}, Prefix: "user."})
		if err != nil || len(resp.Attrs) != 0 {
			t.Fatalf("xattrs on ramfs: %q, %v; want nothing, no error", resp.Attrs, err)
		}
		os.Remove(g)
	})
}
