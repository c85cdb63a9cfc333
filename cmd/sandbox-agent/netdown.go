package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// runNetDown takes every network interface but loopback down in the
// network namespace it runs in, and checks that none is left up. The
// Kubernetes backend runs it in an init container (with NET_ADMIN, which
// the sandbox container itself never gets) so that a network "none"
// sandbox has no way out whatever the cluster's CNI enforces: with its
// links down the kernel drops their routes, and connections fail at once
// with "network is unreachable". Exec does not use the pod network, so the
// agent pipe is unaffected.
func runNetDown(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "sandbox-agent netdown: takes no arguments, got %q\n", strings.Join(args, " "))
		return 2
	}
	downed, err := linksDown()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent netdown: %v\n", err)
		return 1
	}
	if len(downed) == 0 {
		fmt.Println("sandbox-agent netdown: no interface but loopback was up")
		return 0
	}
	fmt.Printf("sandbox-agent netdown: took %s down; only loopback is left\n", strings.Join(downed, ", "))
	return 0
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
