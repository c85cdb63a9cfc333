// Package archive writes a directory tree as a tar stream and extracts one
// into a directory. It carries a sandbox's workspace where no engine can
// copy it for sandboxd (Kubernetes snapshots): `sandbox-agent archive` in
// the source pod, `sandbox-agent extract` where the snapshot is kept, and
// `sandbox-agent restore` in a new sandbox's init container.
//
// Regular files, directories, symbolic links and FIFOs are kept with their
// mode, owner and modification time; hard links become separate copies;
// sockets and devices are left out (nothing in a workspace needs them).
package archive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Stats counts what a Write or an Extract carried.
type Stats struct {
	Entries int
	Bytes   int64 // file data, without tar headers
}

// Write writes the tree under dir to w as a tar stream, names relative to
// dir. A file that vanishes during the walk is left out; any other error
// ends the stream.
func Write(w io.Writer, dir string) (Stats, error) {
	var st Stats
	tw := tar.NewWriter(w)
	root, err := filepath.Abs(dir)
	if err != nil {
		return st, err
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if path == root {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		return writeEntry(tw, path, filepath.ToSlash(rel), info, &st)
	})
	if err != nil {
		return st, err
	}
	return st, tw.Close()
}

// writeEntry writes one entry of the walk.
func writeEntry(tw *tar.Writer, path, name string, info fs.FileInfo, st *Stats) error {
	link := ""
	switch m := info.Mode(); {
	case m.IsRegular(), m.IsDir(), m&fs.ModeNamedPipe != 0:
	case m&fs.ModeSymlink != 0:
		l, err := os.Readlink(path)
		if err != nil {
			return err
		}
		link = l
	default: // sockets, devices
		return nil
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	hdr.Name = name
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Format = tar.FormatPAX
	hdr.Uname, hdr.Gname = "", ""
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		hdr.Uid, hdr.Gid = int(sys.Uid), int(sys.Gid)
	}
	// Access and change times are not carried: PAX records of them would
	// make every archive of an unchanged tree differ.
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	if !info.Mode().IsRegular() {
		hdr.Size = 0
		st.Entries++
		return tw.WriteHeader(hdr)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that shrank while it was read would leave the stream short:
	// pad it, so the archive stays readable (a frozen tree never shrinks).
	n, err := io.CopyN(tw, f, hdr.Size)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n < hdr.Size {
		if _, err := io.CopyN(tw, zeros{}, hdr.Size-n); err != nil {
			return err
		}
	}
	st.Entries++
	st.Bytes += hdr.Size
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Extract reads a tar stream from r into dir, which it creates. An entry
// whose name leaves dir, or whose path goes through a symbolic link the
// stream made, is refused: the stream comes from a sandbox, so it is not
// trusted to stay inside. Owners are set where the process may set them.
func Extract(r io.Reader, dir string) (Stats, error) {
	var st Stats
	root, err := filepath.Abs(dir)
	if err != nil {
		return st, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return st, err
	}
	links := map[string]bool{}
	type dirTime struct {
		path string
		mod  time.Time
	}
	var dirs []dirTime
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("read the archive: %w", err)
		}
		name := filepath.Clean(filepath.FromSlash(hdr.Name))
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return st, fmt.Errorf("the archive's entry %q leaves the directory it is extracted into", hdr.Name)
		}
		for p := filepath.Dir(name); p != "."; p = filepath.Dir(p) {
			if links[p] {
				return st, fmt.Errorf("the archive's entry %q goes through the symbolic link %q it made", hdr.Name, p)
			}
		}
		target := filepath.Join(root, name)
		mode := hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return st, err
			}
			dirs = append(dirs, dirTime{target, hdr.ModTime})
		case tar.TypeReg:
			if err := writeFile(target, tr, hdr.Size); err != nil {
				return st, err
			}
			st.Bytes += hdr.Size
		case tar.TypeSymlink:
			_ = os.RemoveAll(target)
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return st, err
			}
			links[name] = true
			_ = os.Lchown(target, hdr.Uid, hdr.Gid)
			st.Entries++
			continue
		case tar.TypeFifo:
			_ = os.RemoveAll(target)
			if err := syscall.Mkfifo(target, uint32(mode.Perm())); err != nil {
				return st, fmt.Errorf("make the FIFO %s: %w", name, err)
			}
		default:
			continue
		}
		// The owner first: chown clears the set-id bits that chmod sets.
		if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil && !errors.Is(err, fs.ErrPermission) {
			return st, err
		}
		if err := os.Chmod(target, mode); err != nil {
			return st, err
		}
		if hdr.Typeflag != tar.TypeDir {
			_ = os.Chtimes(target, hdr.ModTime, hdr.ModTime)
		}
		st.Entries++
	}
	// Directories' times last: writing into one changes its time.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Chtimes(dirs[i].path, dirs[i].mod, dirs[i].mod)
	}
	return st, nil
}

// writeFile writes size bytes of r to path, replacing what is there.
func writeFile(path string, r io.Reader, size int64) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
