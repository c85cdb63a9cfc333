// Command sandbox-agent runs inside a sandbox. sandboxd execs
// `sandbox-agent attach`, which bridges the exec's stdio to the agent daemon
// (starting it when none runs); the daemon owns the processes sandboxd
// spawns, so they outlive any one exec.
//
// Subcommands: attach, contain, daemon, dap-bridge, init, install, jail, relay, version. attach, daemon and
// init take --socket (default $SANDBOXD_AGENT_SOCKET or
// /tmp/.sandboxd-agent/agent.sock), --state-dir (where the daemon keeps its
// commit journals; default "journal" beside the socket) and
// --single-link-files (refuse to read files with more than one hard link).
package main

import (
	"fmt"
	"os"

	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: sandbox-agent <command> [--socket PATH] [--state-dir DIR] [--single-link-files]

commands:
  archive   write DIR as a tar stream to stdout; --freeze stops the
            sandbox's other processes meanwhile (a consistent copy)
  attach    bridge stdin/stdout to the agent daemon, starting it if none runs
  daemon    run the agent daemon in the foreground
  dap-bridge  run a debug adapter that listens on a unix socket as if it
            spoke on stdio (--socket PATH [--log FILE] -- ADAPTER ARGS...)
  init      run as a container's PID 1: reaper + daemon (+ "-- cmd args...");
            SIGPWR hibernates: records the processes that run for the next
            init to report, stops them and exits with status 75
  contain   (run by the daemon) supervise one exec call: everything it
            starts is killed at its timeout
  extract   read a tar stream from stdin into DIR
  hold      wait for SIGTERM (a pod only there to be exec'd into)
  install   copy this binary to DEST; --links-down also takes every network
            interface but loopback down (needs NET_ADMIN)
  jail      run a program confined on the host: its own uid and namespaces,
            a read-only system, one scratch directory, limits (needs root;
            --uid N --gid N --scratch DIR [--ro PATH]... -- PROGRAM ARGS...)
  relay     let a worker reach sandboxd: pair loopback connections with
            connections sandboxd opens to SOCKET
  restore   copy the tree SRC into DST with modes, owners and times
  version   print the version and protocol version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	args := os.Args[2:]
	var code int
	switch os.Args[1] {
	case "archive":
		code = runArchive(args)
	case "attach":
		code = runAttach(args)
	case "daemon":
		code = runDaemon(args)
	case "init":
		code = runInit(args)
	case daemon.ContainCommand:
		code = daemon.RunContain(args)
	case "dap-bridge":
		code = runDAPBridge(args)
	case "extract":
		code = runExtract(args)
	case "hold":
		code = runHold(args)
	case "install":
		code = runInstall(args)
	case "jail":
		code = runJail(args)
	case "relay":
		code = runRelay(args)
	case "restore":
		code = runRestore(args)
	case "version", "--version", "-v":
		fmt.Printf("sandbox-agent %s (protocol %d)\n", version, proto.Version)
	case "help", "--help", "-h":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "sandbox-agent: unknown command %q; run \"sandbox-agent help\" for the list\n", os.Args[1])
		code = 2
	}
	os.Exit(code)
}
