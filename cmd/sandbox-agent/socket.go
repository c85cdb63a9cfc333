package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

const defaultSocket = "/tmp/.sandboxd-agent/agent.sock"

// socketFlags parses --socket and returns the socket path and the leftover
// arguments.
func socketFlags(name string, args []string) (string, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := os.Getenv("SANDBOXD_AGENT_SOCKET")
	if def == "" {
		def = defaultSocket
	}
	sock := fs.String("socket", def, "the agent daemon's unix socket")
	if err := fs.Parse(args); err != nil {
		return "", nil, fmt.Errorf("%s: %v; usage: sandbox-agent %s [--socket PATH]", name, err, name)
	}
	abs, err := filepath.Abs(*sock)
	if err != nil {
		return "", nil, err
	}
	return abs, fs.Args(), nil
}

// ensureDir makes the socket's directory, private to the owner.
func ensureDir(sock string) error {
	dir := filepath.Dir(sock)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create the agent directory %s: %w", dir, err)
	}
	return os.Chmod(dir, 0o700)
}

var errLocked = errors.New("lock is held by another process")

// lockFile takes an exclusive flock on path, waiting up to wait (0: not at
// all). The lock lasts until the returned file is closed or the process ends.
func lockFile(path string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, err
		}
		if !time.Now().Before(deadline) {
			f.Close()
			return nil, errLocked
		}
		time.Sleep(20 * time.Millisecond)
	}
}
