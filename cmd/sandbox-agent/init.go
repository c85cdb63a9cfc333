package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// runInit is a container's PID 1: it reaps every orphan, serves the agent
// daemon and, given "-- cmd args...", runs cmd and exits with its status.
// SIGTERM or SIGINT kills every process group it owns and exits.
// proto.SignalHibernate (a hibernation) first records the processes that
// run in the state dir, for the init that starts at the wake to report,
// then kills them the same way and exits with proto.ExitHibernated.
func runInit(args []string) int {
	flags, cmdArgs, err := socketFlags("init", args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := daemon.New(append(flags.daemonOptions(), daemon.WithSubreaper(), daemon.WithLogger(log))...)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	hibernated := hibernateOn(ctx, srv, stop, log)

	result := make(chan int, 1)
	if len(cmdArgs) > 0 {
		go func() {
			c, err := srv.RunForeground(ctx, cmdArgs, os.Stdin, os.Stdout, os.Stderr)
			if err != nil {
				fmt.Fprintln(os.Stderr, "sandbox-agent init:", err)
				c = 127
			}
			result <- c
			stop() // the main command ended: so does init
		}()
	}
	serveErr := serve(ctx, srv, flags.socket, log)
	if hibernated() {
		return proto.ExitHibernated
	}
	if serveErr != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent init:", serveErr)
		srv.Close()
		return 1
	}
	code := 0
	if len(cmdArgs) > 0 {
		// serve closed srv, which killed the command if it still ran.
		code = <-result
	}
	return code
}

// hibernateOn hibernates srv when proto.SignalHibernate arrives before ctx
// ends, then ends ctx (stop) so that serve returns. The func it returns
// tells whether a hibernation began, and if so waits for it to be done.
func hibernateOn(ctx context.Context, srv *daemon.Server, stop func(), log *slog.Logger) func() bool {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, proto.SignalHibernate)
	var began atomic.Bool
	done := make(chan struct{})
	// The signal stays caught to the end: a second one, while the first
	// is being served or init is stopping, must not kill init half way.
	go func() {
		select {
		case <-sig:
		case <-ctx.Done():
			return
		}
		began.Store(true)
		log.Info("hibernating: recording the processes that run, then stopping them")
		if err := srv.Hibernate(); err != nil {
			log.Error("hibernation", "err", err)
		}
		close(done)
		stop()
	}()
	return func() bool {
		if !began.Load() {
			return false
		}
		<-done
		return true
	}
}
