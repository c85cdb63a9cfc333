package containerd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/containerd/containerd/mount"
	"golang.org/x/sys/unix"
)

// TestDeadMountsSwept: a temporary mount left by a sandboxd that is gone
// is unmounted and its directory removed by the next backend on the data
// dir; one of a live process is left alone.
func TestDeadMountsSwept(t *testing.T) {
	needContainerd(t)
	if os.Getuid() != 0 {
		t.Skip("mounting needs root")
	}
	dataDir := t.TempDir()
	b0 := newTestBackend(t, WithDataDir(dataDir))
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "layer-file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A pid that is surely gone: a child that has exited and been reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(b0.mountsDir(), strconv.Itoa(cmd.Process.Pid)+"-123")
	live := filepath.Join(b0.mountsDir(), strconv.Itoa(os.Getpid())+"-456")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := mount.All([]mount.Mount{{Type: "bind", Source: src, Options: readonly(mount.Mount{Type: "bind", Options: []string{"rbind"}})}}, d); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = unix.Unmount(live, unix.MNT_DETACH)
		_ = unix.Unmount(dead, unix.MNT_DETACH)
	})
	b := newTestBackend(t, WithDataDir(dataDir))
	if left := mountsUnder(b.mountsDir()); len(left) != 1 || left[0] != live {
		t.Fatalf("mounts left after a new backend: %v; want only the live process's %s", left, live)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the dead process's mount directory is still there: %v", err)
	}
	if err := os.WriteFile(filepath.Join(live, "new"), []byte("y"), 0o644); err == nil {
		t.Fatal("the temporary mount is writable; it must be read-only")
	}
}
