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

	"github.com/sandboxd/sandboxd/agent/daemon"
)

const defaultSocket = "/tmp/.sandboxd-agent/agent.sock"

// agentFlags are the flags attach, daemon and init share.
type agentFlags struct {
	socket string
	// stateDir keeps the daemon's commit journals (default: "journal"
	// beside the socket, on the sandbox's own file system, outside every
	// workspace).
	stateDir string
	// singleLink refuses to read files with more than one hard link (the
	// host backend sets it: there a link may lead outside the workspace).
	singleLink bool
}

// daemonArgs are the flags a daemon started for f is given.
func (f agentFlags) daemonArgs() []string {
	args := []string{"--socket", f.socket, "--state-dir", f.stateDir}
	if f.singleLink {
		args = append(args, "--single-link-files")
	}
	return args
}

// socketFlags parses --socket, --state-dir and --single-link-files and
// returns them and the leftover arguments.
func socketFlags(name string, args []string) (agentFlags, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := os.Getenv("SANDBOXD_AGENT_SOCKET")
	if def == "" {
		def = defaultSocket
	}
	sock := fs.String("socket", def, "the agent daemon's unix socket")
	state := fs.String("state-dir", "", "where the daemon keeps its commit journals")
	single := fs.Bool("single-link-files", false, "refuse to read files with more than one hard link")
	if err := fs.Parse(args); err != nil {
		return agentFlags{}, nil, fmt.Errorf("%s: %v; usage: sandbox-agent %s [--socket PATH] [--state-dir DIR] [--single-link-files]", name, err, name)
	}
	abs, err := filepath.Abs(*sock)
	if err != nil {
		return agentFlags{}, nil, err
	}
	f := agentFlags{socket: abs, stateDir: *state, singleLink: *single}
	if f.stateDir == "" {
		f.stateDir = filepath.Join(filepath.Dir(abs), "journal")
	}
	if f.stateDir, err = filepath.Abs(f.stateDir); err != nil {
		return agentFlags{}, nil, err
	}
	return f, fs.Args(), nil
}

// daemonOptions are the Server options f asks for.
func (f agentFlags) daemonOptions() []daemon.Option {
	opts := []daemon.Option{daemon.WithStateDir(f.stateDir)}
	if f.singleLink {
		opts = append(opts, daemon.WithSingleLinkFiles())
	}
	return opts
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
