package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A daemon whose data dir is full cannot write its admin token: that is
// an error at start (exit status 1, one error message), not a truncated token
// linked into place and a daemon serving with it.
func TestServeRefusesToStartWhenTheTokenCannotBeWritten(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4k,mode=0700"); err != nil {
		t.Skipf("a tmpfs cannot be mounted here (%v)", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for i := 0; i < 64; i++ {
		if _, err = filler.Write(buf); err != nil {
			break
		}
	}
	filler.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the 4 KiB tmpfs did not fill up: %v", err)
	}
	code, stdout, stderr := runCLI(t, "", "serve", "--backend", "host", "--data-dir", dir, "--listen", "127.0.0.1:0", "--agent-binary", fakeAgent(t))
	if code != 1 || !strings.Contains(stderr, "cannot be written") {
		t.Fatalf("serve with a full data dir: exit %d, stderr %q; want exit 1 saying the token cannot be written", code, stderr)
	}
	if strings.Contains(stdout, "serving on") {
		t.Errorf("serve served without a token: %s", stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "token")); !os.IsNotExist(err) {
		t.Errorf("a token file is at its path after the failed write (%v)", err)
	}
}
