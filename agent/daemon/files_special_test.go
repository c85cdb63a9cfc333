package daemon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// A FIFO in the workspace is refused at once by every read path (before,
// opening one waited for a writer that never came).
func TestFIFOIsRefusedNotWaitedOn(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{"ok.txt": "fine", "sub/x.go": "package x"})
	for _, p := range []string{"pipe", "sub/.gitignore"} {
		if err := syscall.Mkfifo(filepath.Join(root, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "pipe"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "pipe is a named pipe (FIFO), not a regular file") {
		t.Errorf("read of a FIFO = %v, want invalid_argument naming it and its type", err)
	}
	rf, err := c.ReadFiles(ctx, &proto.ReadFilesRequest{Root: root, Paths: []string{"pipe", "ok.txt"}})
	if err != nil || !strings.Contains(rf.Files[0].Skipped, "named pipe") || string(rf.Files[1].Data) != "fine" {
		t.Errorf("batch read with a FIFO = %+v, %v; want the FIFO skipped with its type and the file read", rf, err)
	}
	err = c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "pipe", Data: []byte("x"), ExpectSHA256: "00"}}})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("write expecting a FIFO's hash = %v, want invalid_argument naming its type", err)
	}
	w, err := c.Walk(ctx, &proto.WalkRequest{Root: root, Path: ".", Gitignore: true})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, f := range w.Files {
		listed = append(listed, f.Path)
	}
	if strings.Join(listed, ",") != "ok.txt,sub/x.go" {
		t.Errorf("walk with a FIFO .gitignore lists %v, want ok.txt and sub/x.go", listed)
	}
}

// The files a commit keeps beside its targets never show: walk leaves
// them out, and reads, stats and writes of their names are refused.
func TestCommitFilesAreHidden(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	root := t.TempDir()
	stage, backup := ".sandboxd-stage.0123456789ab", ".sandboxd-backup.0123456789ab"
	writeTree(t, root, map[string]string{"a.txt": "a", stage: "staged", "d/" + backup: "old"})
	w, err := c.Walk(ctx, &proto.WalkRequest{Root: root, Path: "."})
	if err != nil || len(w.Files) != 1 || w.Files[0].Path != "a.txt" {
		t.Fatalf("walk = %+v, %v; want only a.txt", w, err)
	}
	if _, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: stage}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("read of a stage file = %v, want not_found", err)
	}
	if _, err := c.Stat(ctx, &proto.StatRequest{Root: root, Path: "d/" + backup}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stat of a backup file = %v, want not_found", err)
	}
	rf, err := c.ReadFiles(ctx, &proto.ReadFilesRequest{Root: root, Paths: []string{"d/" + backup}})
	if err != nil || rf.Files[0].Skipped != "not found" || rf.Files[0].Data != nil {
		t.Errorf("batch read of a backup file = %+v, %v; want it not found", rf, err)
	}
	err = c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: stage, Data: []byte("x")}}})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("write to a stage file's name = %v, want invalid_argument", err)
	}
	// A name that only looks alike is an ordinary file.
	writeTree(t, root, map[string]string{".sandboxd-stage.notanid": "mine"})
	if r, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: ".sandboxd-stage.notanid"}); err != nil || string(r.Data) != "mine" {
		t.Errorf("read of a look-alike name = %+v, %v", r, err)
	}
}

// With WithSingleLinkFiles a file with a second hard link is refused with
// an error message saying why and what to do; without it, it is read.
func TestSingleLinkFiles(t *testing.T) {
	ctx := testCtx(t)
	root, outside := t.TempDir(), t.TempDir()
	writeTree(t, outside, map[string]string{"secret": "outside content"})
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(root, "leak")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	_, strict := startPair(t, daemon.WithSingleLinkFiles())
	_, err := strict.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "leak"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "2 hard links") || !strings.Contains(err.Error(), "cp leak") {
		t.Errorf("read of a linked file = %v, want failed_precondition naming the links and the copy", err)
	}
	rf, err := strict.ReadFiles(ctx, &proto.ReadFilesRequest{Root: root, Paths: []string{"leak"}})
	if err != nil || rf.Files[0].Data != nil || !strings.Contains(rf.Files[0].Skipped, "hard links") {
		t.Errorf("batch read of a linked file = %+v, %v; want it skipped", rf, err)
	}
	sum := sha256.Sum256([]byte("outside content"))
	err = strict.WriteFiles(ctx, &proto.WriteFilesRequest{Root: root, Files: []proto.WriteFile{{Path: "leak", Data: []byte("x"), ExpectSHA256: hex.EncodeToString(sum[:])}}})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "hard links") {
		t.Errorf("a write checking a linked file's hash = %v, want it refused (the hash would tell the outside content)", err)
	}
	_, lax := startPair(t)
	if r, err := lax.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "leak"}); err != nil || string(r.Data) != "outside content" {
		t.Errorf("without the option the linked file reads %+v, %v", r, err)
	}
}
