package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sandboxd/sandboxd/agent/daemon"
)

func runDaemon(args []string) int {
	flags, rest, err := socketFlags("daemon", args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("daemon takes no arguments besides its flags (got %q)", rest)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := daemon.New(append(flags.daemonOptions(), daemon.WithSubreaper(), daemon.WithLogger(log))...)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	if err := serve(ctx, srv, flags.socket, log); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
		srv.Close()
		return 1
	}
	return 0
}

// serve listens on sock (as the one daemon for it) and serves until ctx
// ends, then closes srv, which kills every process group it owns.
func serve(ctx context.Context, srv *daemon.Server, sock string, log *slog.Logger) error {
	l, unlock, err := listen(sock)
	if err != nil {
		return err
	}
	defer unlock()
	// Holding the daemon lock, no other daemon of this socket commits:
	// settle what a killed one left before serving anyone.
	if err := srv.RecoverCommits(); err != nil {
		log.Error("unfinished commits were left as they are; the next file operation on their workspace retries", "err", err)
	}
	// Likewise a hibernation's record is consumed by the one daemon that
	// serves, never by one that loses the lock.
	if err := srv.RestoreHibernation(); err != nil {
		log.Error("the processes a hibernation stopped may not all be reported", "err", err)
	}
	log.Info("agent daemon listening", "socket", sock, "pid", os.Getpid())
	serveErr := srv.Serve(ctx, l)
	closeErr := srv.Close()
	os.Remove(sock)
	log.Info("agent daemon stopped")
	return errors.Join(serveErr, closeErr)
}

// listen takes the daemon lock beside sock (one daemon per socket), clears
// a stale socket file and listens with mode 0600.
func listen(sock string) (net.Listener, func(), error) {
	if err := ensureDir(sock); err != nil {
		return nil, nil, err
	}
	lock, err := lockFile(filepath.Join(filepath.Dir(sock), filepath.Base(sock)+".daemon.lock"), 0)
	if errors.Is(err, errLocked) {
		return nil, nil, fmt.Errorf("another agent daemon already serves %s; attach to it instead", sock)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot lock the daemon lock for %s: %w", sock, err)
	}
	// Holding the lock, any socket file left is from a daemon that died.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		lock.Close()
		return nil, nil, fmt.Errorf("cannot remove the stale socket %s: %w", sock, err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("cannot listen on %s: %w", sock, err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		l.Close()
		lock.Close()
		return nil, nil, fmt.Errorf("cannot restrict %s to its owner: %w", sock, err)
	}
	return l, func() { lock.Close() }, nil
}
