package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent/archive"
)

// maxFreeze bounds how long `archive --freeze` keeps the sandbox's
// processes stopped: past it they are continued and the archive fails,
// since what is read after would not be one consistent point.
const maxFreeze = 10 * time.Minute

// runArchive writes DIR as a tar stream to stdout. With --freeze every
// other process of the sandbox is stopped while it is read and continued
// when it is done, fails, or the reader goes away (a write to stdout
// fails), or a signal ends it.
func runArchive(args []string) int {
	fl := flag.NewFlagSet("archive", flag.ContinueOnError)
	freeze := fl.Bool("freeze", false, "stop every other process of the sandbox while the tree is read")
	if err := fl.Parse(args); err != nil || fl.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent archive [--freeze] DIR")
		return 2
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if *freeze {
		f, err := archive.Freeze(1)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sandbox-agent archive: %v\n", err)
			return 1
		}
		defer f.Thaw()
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
		timer := time.NewTimer(maxFreeze)
		go func() {
			select {
			case s := <-sigs:
				f.Thaw()
				fmt.Fprintf(os.Stderr, "sandbox-agent archive: stopped by %v; the sandbox's processes were continued\n", s)
			case <-timer.C:
				f.Thaw()
				fmt.Fprintf(os.Stderr, "sandbox-agent archive: the sandbox stayed frozen for %v, the most allowed; its processes were continued and the archive is abandoned\n", maxFreeze)
			}
			os.Exit(1)
		}()
	}
	st, err := archive.Write(w, fl.Arg(0))
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent archive: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "sandbox-agent archive: %d entries, %d bytes of file data\n", st.Entries, st.Bytes)
	return 0
}

// runExtract reads a tar stream from stdin into DIR.
func runExtract(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent extract DIR")
		return 2
	}
	st, err := archive.Extract(bufio.NewReaderSize(os.Stdin, 1<<20), args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent extract: %v\n", err)
		return 1
	}
	// Whatever follows the archive's end marker is read, so the writer
	// is never cut off mid-stream.
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Printf("%d %d\n", st.Entries, st.Bytes)
	return 0
}

// runRestore copies the tree SRC into DST, keeping modes, owners and
// times (the init container of a sandbox made from a snapshot).
func runRestore(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent restore SRC DST")
		return 2
	}
	r, w := io.Pipe()
	go func() { _, err := archive.Write(w, args[0]); w.CloseWithError(err) }()
	st, err := archive.Extract(r, args[1])
	r.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-agent restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "sandbox-agent restore: %d entries, %d bytes of file data\n", st.Entries, st.Bytes)
	return 0
}

// runHold waits for SIGTERM or SIGINT: the main process of a pod that is
// only there to be exec'd into (a snapshot's loader).
func runHold(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-agent hold")
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	return 0
}
