package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// runInstall copies this binary to DEST and, with --links-down, takes
// every network interface but loopback down in the network namespace it
// runs in. The Kubernetes backend runs it as a sandbox pod's one init
// container: the copy is how the agent reaches an image that lacks it, and
// the links are how a network "none" sandbox is cut off whatever the
// cluster's CNI enforces (with its links down the kernel drops their routes
// and connections fail at once as unreachable). Exec does not use the pod
// network, so the agent pipe is unaffected. One container for both, since
// the kubelet takes about a second to notice each init container's exit.
func runInstall(args []string) int {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	down := fs.Bool("links-down", false, "take every interface but loopback down (needs NET_ADMIN)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent install [--links-down] DEST")
		return 2
	}
	if err := installSelf(fs.Arg(0)); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent install: %v\n", err)
		return 1
	}
	if !*down {
		return 0
	}
	downed, err := linksDown()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent install: %v\n", err)
		return 1
	}
	if len(downed) == 0 {
		fmt.Println("sandbox-agent install: no interface but loopback was up")
		return 0
	}
	fmt.Printf("sandbox-agent install: took %s down; only loopback is left\n", strings.Join(downed, ", "))
	return 0
}

// installSelf copies the running executable to dest (mode 0755) through a
// temporary file and a rename, so dest is never a partial binary.
func installSelf(dest string) error {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("cannot read this executable: %w", err)
	}
	defer self.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return fmt.Errorf("cannot write beside %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := io.Copy(tmp, self); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot copy this executable to %s: %w", dest, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot make %s executable: %w", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("cannot put the agent at %s: %w", dest, err)
	}
	return nil
}

// linksDown clears IFF_UP on every non-loopback interface and returns the
// names it took down. It fails if one cannot be taken down or is up again
// when it checks afterwards.
func linksDown() ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("cannot list the network interfaces: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open a socket to change interface flags: %w", err)
	}
	defer unix.Close(fd)
	var downed []string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || i.Flags&net.FlagUp == 0 {
			continue
		}
		ifr, err := unix.NewIfreq(i.Name)
		if err != nil {
			return downed, fmt.Errorf("interface %q: %w", i.Name, err)
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return downed, fmt.Errorf("cannot read the flags of %s: %w", i.Name, err)
		}
		ifr.SetUint16(ifr.Uint16() &^ unix.IFF_UP)
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
			if errors.Is(err, unix.EPERM) {
				return downed, fmt.Errorf("cannot take %s down: this needs the NET_ADMIN capability", i.Name)
			}
			return downed, fmt.Errorf("cannot take %s down: %w", i.Name, err)
		}
		downed = append(downed, i.Name)
	}
	after, err := net.Interfaces()
	if err != nil {
		return downed, fmt.Errorf("cannot list the network interfaces again: %w", err)
	}
	for _, i := range after {
		if i.Flags&net.FlagLoopback == 0 && i.Flags&net.FlagUp != 0 {
			return downed, fmt.Errorf("%s is up again after it was taken down", i.Name)
		}
	}
	return downed, nil
}
