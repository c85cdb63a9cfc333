package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// systemDirs are shown read-only: what interpreters and their libraries
// need. A directory that is a symlink on the host (merged /usr) is the
// same symlink in the jail.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcAllowed are the /etc entries a jail sees (read-only): the dynamic
// linker's cache, name service and locale files, certificates, and the
// configuration of the interpreters' own packages. Everything else —
// shadow, sudoers, ssh keys, sandboxd's own config — stays out.
var etcAllowed = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "host.conf", "gai.conf",
	"localtime", "timezone", "locale.alias", "mime.types", "protocols", "services", "os-release",
	"debian_version", "alternatives", "ssl/certs", "ca-certificates", "ca-certificates.conf",
	"fonts", "matplotlibrc", "magic", "magic.mime",
}

// etcPrefixed are /etc entries allowed by the start of their name.
var etcPrefixed = []string{"python3"}

// devices are bound from the host's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom"}

const (
	oldRoot = "/oldroot"
	newRoot = "/newroot"
)

// buildRoot makes the jail's root and enters it. It runs in init, in new
// mount and PID namespaces, as root.
func buildRoot(s *Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("cannot make the jail's mounts private: %w", err)
	}
	// A scratch tmpfs becomes the root for a moment, with the host's root
	// below it at /oldroot: every bind then comes from /oldroot, whatever
	// the new root covers.
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size=1m"); err != nil {
		return fmt.Errorf("cannot mount the jail's staging tmpfs: %w", err)
	}
	for _, d := range []string{"/tmp" + oldRoot, "/tmp" + newRoot} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if err := unix.PivotRoot("/tmp", "/tmp"+oldRoot); err != nil {
		return fmt.Errorf("cannot pivot to the staging root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m"); err != nil {
		return fmt.Errorf("cannot mount the jail's root tmpfs: %w", err)
	}
	for _, d := range systemDirs {
		if err := mirror(d); err != nil {
			return err
		}
	}
	if err := makeEtc(s); err != nil {
		return err
	}
	if err := makeDev(); err != nil {
		return err
	}
	for _, p := range s.ReadOnly {
		if err := bind(p, p, false, true); err != nil {
			return err
		}
	}
	if err := bind(s.Scratch, s.Scratch, true, true); err != nil {
		return err
	}
	if err := os.Mkdir(newRoot+"/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", newRoot+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("cannot mount the jail's /proc: %w", err)
	}
	// Enter the new root and drop the old one (the staging tmpfs with the
	// host's root below it) from the namespace.
	if err := os.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("cannot pivot to the jail's root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("cannot drop the host's root from the jail: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("cannot make the jail's root read-only: %w", err)
	}
	return nil
}

// mirror shows the host's path p at the same place: a symlink as the same
// symlink, a directory or file as a read-only bind. A missing p is skipped.
func mirror(p string) error {
	fi, err := os.Lstat(oldRoot + p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(oldRoot + p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(newRoot+p), 0o755); err != nil {
			return err
		}
		return os.Symlink(target, newRoot+p)
	}
	return bind(p, p, false, false)
}

// bind shows the host's src at dst inside, read-only unless rw. The source
// is opened without following a symlink in its last component and bound
// through its descriptor, so a link swapped in (by a program of a jail
// that can write the parent) is refused instead of followed. Its parents
// are the host's own (root-owned) directories.
func bind(src, dst string, rw, strict bool) error {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if strict {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(oldRoot+src, flags, 0)
	if err != nil {
		return fmt.Errorf("cannot open %s for the jail: %w", src, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	target := newRoot + dst
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	case unix.S_IFLNK:
		return fmt.Errorf("%s is a symbolic link; the jail binds only directories and files", src)
	default:
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			return err
		} else {
			f.Close()
		}
	}
	proc := oldRoot + "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(proc, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("cannot show %s in the jail: %w", src, err)
	}
	ro := uintptr(unix.MS_RDONLY)
	if rw {
		ro = 0
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|ro, ""); err != nil {
		return fmt.Errorf("cannot restrict %s in the jail: %w", src, err)
	}
	return nil
}

// makeEtc builds a minimal /etc: the allowed host files read-only, and a
// passwd, group, hostname and hosts of the jail's own.
func makeEtc(s *Spec) error {
	if err := os.Mkdir(newRoot+"/etc", 0o755); err != nil {
		return err
	}
	names := append([]string{}, etcAllowed...)
	if ents, err := os.ReadDir(oldRoot + "/etc"); err == nil {
		for _, e := range ents {
			for _, pre := range etcPrefixed {
				if strings.HasPrefix(e.Name(), pre) {
					names = append(names, e.Name())
				}
			}
		}
	}
	if s.Network {
		names = append(names, "resolv.conf")
	}
	for _, n := range names {
		if err := mirror("/etc/" + n); err != nil {
			return err
		}
	}
	files := map[string]string{
		"passwd":   fmt.Sprintf("root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nkernel:x:%d:%d:sandboxd kernel:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", s.UID, s.GID, s.Scratch),
		"group":    fmt.Sprintf("root:x:0:\nkernel:x:%d:\nnogroup:x:65534:\n", s.GID),
		"hostname": hostname + "\n",
		"hosts":    "127.0.0.1\tlocalhost " + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for n, body := range files {
		if err := os.WriteFile(newRoot+"/etc/"+n, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hostname is the jail's name for itself (its own UTS namespace).
const hostname = "kernel"

// makeDev builds /dev: the harmless devices bound from the host, the
// usual links, and a small private /dev/shm.
func makeDev() error {
	dev := newRoot + "/dev"
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("cannot mount the jail's /dev: %w", err)
	}
	for _, d := range devices {
		if err := bindDevice("/dev/" + d); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, dev+"/"+name); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dev+"/shm", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("cannot mount the jail's /dev/shm: %w", err)
	}
	return unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// bindDevice binds a character device read-write (writes to /dev/null
// must work), keeping it a device.
func bindDevice(p string) error {
	target := newRoot + p
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return err
	}
	f.Close()
	if err := unix.Mount(oldRoot+p, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("cannot show %s in the jail: %w", p, err)
	}
	return unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}
