package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxd/sandboxd/agent/daemon"
)

// runInit is a container's PID 1: it reaps every orphan, serves the agent
// daemon and, given "-- cmd args...", runs cmd and exits with its status.
// SIGTERM or SIGINT kills every process group it owns and exits.
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
	if err := serve(ctx, srv, flags.socket, log); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent init:", err)
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
