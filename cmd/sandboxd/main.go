// Command sandboxd is the sandboxd daemon (`sandboxd serve`) and a small
// command-line client of its HTTP API for a person.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `sandboxd — tools for AI-agent conversations, run inside their sandboxes.

Usage:
  sandboxd serve [--listen 127.0.0.1:7788] [--data-dir DIR] [--backend auto|docker|host|containerd|kubernetes]
                 [--config FILE] [--agent-binary PATH] [--log-format text|json] [--log-level info]
  sandboxd sandbox create --conversation ID [--image IMG] [--network none|bridge] [--host-path DIR]
                          [--cpus N] [--memory-mb N] [--pids N] [--env K=V]...
  sandboxd sandbox list [--conversation ID]
  sandboxd sandbox get ID
  sandboxd sandbox delete ID
  sandboxd run create --conversation ID [--surface default|plan|readonly] [--workdir DIR] [--vibe]
                      [--space ID] [--approval auto|ask] [--parent RUN]
  sandboxd run list
  sandboxd run get RUN
  sandboxd run delete RUN
  sandboxd tools --run RUN
  sandboxd call --run RUN [--stream] TOOL ['{"json": "args"}' | -]
  sandboxd token new --tenant NAME
  sandboxd audit verify DIR
  sandboxd version

Client commands take --addr (default $SANDBOXD_ADDR or http://127.0.0.1:7788) and a token from
--token, $SANDBOXD_TOKEN, or DATA_DIR/token (--data-dir, default $SANDBOXD_DATA_DIR or ./.data).
They print plain text; --json prints the full answer for scripts. Every command takes --help.
The console is at the daemon's address (http://127.0.0.1:7788/ redirects to /ui/).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal starts a graceful shutdown, a second one
	// gets the default behaviour and ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command and returns the process exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = runServe(ctx, args[1:], stdout, stderr)
	case "sandbox":
		err = runSandbox(ctx, args[1:], stdout)
	case "run":
		err = runRun(ctx, args[1:], stdout)
	case "tools":
		err = runTools(ctx, args[1:], stdout)
	case "call":
		err = runCall(ctx, args[1:], stdin, stdout, stderr)
	case "token":
		err = runToken(args[1:], stdout)
	case "audit":
		err = runAudit(args[1:], stdout)
	case "version", "--version":
		fmt.Fprintf(stdout, "sandboxd %s (%s)\n", version, runtime.Version())
		return 0
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" { // sandboxd help run create
			return run(ctx, append(append([]string(nil), args[1:]...), "--help"), stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "sandboxd: unknown command %q; run `sandboxd help` for the list\n", args[0])
		return 2
	}
	if err == nil {
		return 0
	}
	var help helpRequest
	if errors.As(err, &help) {
		fmt.Fprint(stdout, help.text)
		return 0
	}
	if ue, ok := err.(usageError); ok {
		fmt.Fprintf(stderr, "sandboxd: %s\n", ue.msg)
		return 2
	}
	if err == errToolFailed || err == errChainBroken {
		return 1
	}
	fmt.Fprintf(stderr, "sandboxd: %v\n", err)
	return 1
}

// usageError is a command line that cannot be run as typed (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }
