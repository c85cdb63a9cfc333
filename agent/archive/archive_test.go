package archive

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a/b"), 0o750))
	must(os.WriteFile(filepath.Join(src, "a/b/data.bin"), bytes.Repeat([]byte{7}, 3<<20), 0o640))
	must(os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(filepath.Join(src, "empty"), nil, 0o600))
	must(os.Symlink("a/b/data.bin", filepath.Join(src, "link")))
	must(syscall.Mkfifo(filepath.Join(src, "fifo"), 0o620))
	must(os.Chmod(filepath.Join(src, "fifo"), 0o620))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(filepath.Join(src, "run.sh"), old, old))
	must(os.Chtimes(filepath.Join(src, "a/b"), old, old))

	var buf bytes.Buffer
	ws, err := Write(&buf, src)
	must(err)
	dst := filepath.Join(t.TempDir(), "out")
	es, err := Extract(&buf, dst)
	must(err)
	if ws.Entries != es.Entries || ws.Bytes != es.Bytes || ws.Bytes != 3<<20+10 {
		t.Fatalf("wrote %+v, extracted %+v", ws, es)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{"a/b", os.ModeDir | 0o750}, {"a/b/data.bin", 0o640}, {"run.sh", 0o755}, {"empty", 0o600}, {"fifo", os.ModeNamedPipe | 0o620}} {
		fi, err := os.Lstat(filepath.Join(dst, c.path))
		must(err)
		if fi.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "a/b/data.bin" {
		t.Errorf("link reads %q, %v", l, err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "link"))
	must(err)
	if !bytes.Equal(got, bytes.Repeat([]byte{7}, 3<<20)) {
		t.Error("the data read through the link differs")
	}
	for _, p := range []string{"run.sh", "a/b"} {
		fi, err := os.Stat(filepath.Join(dst, p))
		must(err)
		if !fi.ModTime().Equal(old) {
			t.Errorf("%s: mtime %v, want %v", p, fi.ModTime(), old)
		}
	}
}

func TestExtractRefusesEscapes(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []tar.Header
		want    string
	}{
		{"dotdot", []tar.Header{{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "leaves the directory"},
		{"absolute", []tar.Header{{Name: "/etc/evil", Typeflag: tar.TypeReg, Mode: 0o644}}, "leaves the directory"},
		{"through a link", []tar.Header{
			{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
			{Name: "l/evil", Typeflag: tar.TypeReg, Mode: 0o644},
		}, "symbolic link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range c.entries {
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			tw.Close()
			dir := t.TempDir()
			_, err := Extract(&buf, dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
				t.Fatal("a file was written outside the directory")
			}
		})
	}
}

func TestFreezeRefusesOutsideASandbox(t *testing.T) {
	if comm(1) == "sandbox-agent" {
		t.Skip("PID 1 is sandbox-agent here")
	}
	if _, err := Freeze(); err == nil || !strings.Contains(err.Error(), "not a sandbox's own PID namespace") {
		t.Fatalf("Freeze outside a sandbox: %v", err)
	}
}
