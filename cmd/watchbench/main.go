// Command watchbench measures the workspace watch (issue 14 §1) on Docker
// and rewrites the "watch" section of BENCHMARKS.md:
//
//   - the time from a shell edit of a dependency (sed through the agent's
//     exec, not the write tools) to fresh diagnostics on its consumer, for
//     gopls and pyright, with the watch and without it (the behaviour
//     before it: only the consumer's own file is re-read at each call);
//   - the agent's CPU and memory with a 50,000-file workspace watched,
//     idle and during a `git checkout` of 5,000 files, next to the same
//     agent not watching.
//
// Run from the repository root after `make build`:
//
//	SANDBOXD_AGENT_BIN=$PWD/bin/sandbox-agent go run ./cmd/watchbench [-n 8] [-out BENCHMARKS.md] [--smoke]
//
// --smoke makes one edit per language and mode over a 200-file tree, with
// short waits, and checks the section renders, leaving -out alone
// (scripts/test.sh runs it so the command cannot rot).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

func main() {
	n := flag.Int("n", 8, "shell edits per language and mode")
	peerWait := flag.Duration("peer-wait", 10*time.Second, "how long one edit waits for fresh diagnostics without the watch")
	files := flag.Int("files", 50000, "files in the watched tree")
	checkout := flag.Int("checkout", 5000, "files the git checkout changes")
	out := flag.String("out", "BENCHMARKS.md", "file whose watch section is rewritten")
	image := flag.String("image", bench.EnvOr("SANDBOXD_TEST_IMAGE", "sandboxd-sandbox:latest"), "sandbox image with gopls, pyright and git")
	smoke := flag.Bool("smoke", false, "one edit per language and mode, a 200-file tree, short waits; check the section renders without rewriting -out")
	flag.Parse()
	idle := 10 * time.Second
	if *smoke {
		*n, *peerWait, *files, *checkout, idle = 1, 3*time.Second, 200, 20, 2*time.Second
	}
	if *n < 1 || *files < 1 || *checkout < 1 || *checkout > *files || *peerWait <= 0 {
		fmt.Fprintf(os.Stderr, "watchbench: -n %d and -files %d must be at least 1, -checkout %d between 1 and -files, -peer-wait %s positive\n", *n, *files, *checkout, *peerWait)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if err := run(ctx, opts{n: *n, peerWait: *peerWait, files: *files, checkout: *checkout, idle: idle, out: *out, image: *image, smoke: *smoke}); err != nil {
		fmt.Fprintln(os.Stderr, "watchbench:", err)
		os.Exit(1)
	}
}

type opts struct {
	n        int
	peerWait time.Duration
	files    int
	checkout int
	idle     time.Duration // the idle window of the cost figures
	out      string
	image    string
	smoke    bool
}
