package daemon_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
)

func TestHelloAndReadFile(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	h, err := c.Hello(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != proto.Version || h.PID != os.Getpid() {
		t.Fatalf("hello = %+v", h)
	}
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello"), 0o644)
	r, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: root, Path: "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Data) != "hello" || r.Size != 5 {
		t.Fatalf("read = %+v", r)
	}
}
