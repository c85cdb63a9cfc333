// Command sandboxd-cluster installs sandboxd's Helm chart (compiled in) as N
// replicas on the local test cluster of scripts/k8s-up.sh and removes it
// again: `make cluster-deploy REPLICAS=N` and the first half of
// `make cluster-down`. deploy prints, as its last line on stdout, one JSON
// object naming a loopback URL per replica slot, a tenant's token, the
// namespace and the deployment; everything else goes to stderr.
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

const usage = `sandboxd-cluster — sandboxd's chart as N replicas on the local test cluster.

Usage:
  sandboxd-cluster deploy [--replicas 3] [--namespace sandboxd-replicas] [--release sandboxd]
                          [--port 27800] [--image sandboxd:latest] [--default-image IMG]
                          [--kubeconfig FILE] [--timeout 5m] [--verbose]
  sandboxd-cluster undeploy [--namespace sandboxd-replicas] [--release sandboxd]
                          [--kubeconfig FILE] [--timeout 3m] [--verbose]

deploy installs the chart (or upgrades the release) with hostNetwork, replica i on
http://127.0.0.1:<port+i>, a tenant e2e with a fresh token, the images from the node
(pull policy Never), waits until every replica is Ready and answers, and prints last
  {"urls": [...], "token": "...", "namespace": "...", "deployment": "..."}
undeploy removes the release, the sandboxes, Leases and run records of its deployment,
and the namespace when deploy made it. --kubeconfig defaults to $KUBECONFIG
(source /var/lib/sandboxd-k8s/env after make cluster-up).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A second signal ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command and returns the exit status: 0, 1 on failure,
// 2 on a command line that cannot be run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "deploy", "undeploy":
		var o options
		if o, err = parseFlags(args[0], args[1:]); err == nil {
			if args[0] == "deploy" {
				err = deploy(ctx, o, stdout, stderr)
			} else {
				err = undeploy(ctx, o, stderr)
			}
		}
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usagef("unknown command %q; the commands are deploy and undeploy", args[0])
	}
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "sandboxd-cluster: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// usageError is a command line that cannot be run as typed (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }
