package api

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullTemp is a real temporary token file whose writes go to /dev/full,
// where the kernel fails every write with "no space left on device".
type fullTemp struct {
	*os.File // the temporary file: its name, sync and close
	full     *os.File
}

func (f fullTemp) Write(p []byte) (int, error) { return f.full.Write(p) }

func (f fullTemp) Close() error {
	f.full.Close()
	return f.File.Close()
}

// checkNoToken fails unless dir holds no token and no temporary file.
func checkNoToken(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, TokenFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a token file is left in place after the failed write (stat: %v)", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".token-") {
			t.Errorf("the temporary file %s is left in the data dir", e.Name())
		}
	}
}

func TestAdminTokenWriteFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full to fail writes with: %v", err)
	}
	dir := t.TempDir()
	var made string
	_, _, _, err := loadOrCreateAdminToken(dir, func(dir string) (tokenTemp, error) {
		tmp, err := newTokenTemp(dir)
		if err != nil {
			return nil, err
		}
		made = tmp.Name()
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			tmp.Close()
			return nil, err
		}
		return fullTemp{File: tmp.(*os.File), full: full}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "cannot be written") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write that failed with no space: err = %v, want the admin token cannot be written (ENOSPC)", err)
	}
	if made == "" {
		t.Fatal("no temporary file was made: the write was never tried")
	}
	checkNoToken(t, dir)
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory (root only).
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("a tmpfs cannot be mounted here (%v)", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// A data dir on a full disk: the token is not written, nothing is left at
// its path, and once there is room again the next start makes one.
func TestAdminTokenFullDisk(t *testing.T) {
	dir := mountTmpfs(t, "size=4k,mode=0700")
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for i := 0; i < 64; i++ { // 4 KiB fill the disk; the bound ends the loop whatever happens
		if _, err = filler.Write(buf); err != nil {
			break
		}
	}
	filler.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the 4 KiB tmpfs did not fill up: %v", err)
	}
	_, _, _, err = LoadOrCreateAdminToken(dir)
	if err == nil || !strings.Contains(err.Error(), "cannot be written") {
		t.Fatalf("a token written to a full disk: err = %v, want the admin token cannot be written", err)
	}
	checkNoToken(t, dir)

	os.Remove(filepath.Join(dir, "filler"))
	tok, _, created, err := LoadOrCreateAdminToken(dir)
	if err != nil || !created {
		t.Fatalf("with room again: %v (created %v)", err, created)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, TokenFileName)); strings.TrimSpace(string(b)) != tok {
		t.Fatalf("the token file holds %q, want %q", b, tok)
	}
}

// A read-only data dir is an error that names the directory.
func TestAdminTokenReadOnlyDataDir(t *testing.T) {
	var dir string
	if os.Geteuid() == 0 { // root writes into a directory of any mode; only a read-only mount stops it
		dir = mountTmpfs(t, "ro,size=4k,mode=0700")
	} else {
		dir = t.TempDir()
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	}
	_, _, _, err := LoadOrCreateAdminToken(dir)
	if err == nil || !strings.Contains(err.Error(), "cannot be written in the data dir "+dir) {
		t.Fatalf("a read-only data dir: err = %v, want the admin token cannot be written in the data dir", err)
	}
	checkNoToken(t, dir)
}

var _ tokenTemp = fullTemp{}
