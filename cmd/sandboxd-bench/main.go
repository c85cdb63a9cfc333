// Command sandboxd-bench measures a real sandboxd against plain Docker on
// this machine and writes the figures into BENCHMARKS.md: sandbox create and
// start time, reading a 4 KiB file through sandboxd's pipe next to a fresh
// `docker exec cat`, and sandboxd's memory with many idle sandboxes.
//
// It starts the built sandboxd (docker backend) as a child on a free
// loopback port, one fresh daemon per benchmark, and removes every container
// it made, also when a benchmark fails or the run is interrupted.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stderr)
	if err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintln(os.Stderr, "sandboxd-bench:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "sandboxd-bench:", err)
		os.Exit(1)
	}
}

// usageError is bad command-line input.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// progress writes one line of progress for the person watching.
func progress(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "sandboxd-bench: "+format+"\n", args...)
}
