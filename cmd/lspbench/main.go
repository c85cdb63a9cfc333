// Command lspbench measures the lsp tool family on Docker and rewrites the
// "lsp" section of BENCHMARKS.md (DESIGN.md §4 "lsp"; issue 3 Performance):
//
//   - a warm `definition` through sandboxd (HTTP -> agent pipe -> gopls),
//     side by side in the same run with the same request sent straight to a
//     gopls process over its own stdio pipe (docker exec -i in the same
//     sandbox, same files);
//   - the time from the first lsp call on a fresh sandbox to its result;
//   - the latency diagnostics on write adds to a one-line edit.
//
// Run from the repository root: go run ./cmd/lspbench [-n 400] [-out BENCHMARKS.md] [--smoke]
//
// --smoke makes one call of each kind and checks the section renders, leaving
// -out alone (scripts/test.sh runs it so the command cannot rot).
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
	n := flag.Int("n", 400, "warm definition calls per path")
	fresh := flag.Int("fresh", 3, "fresh sandboxes for the first-call figure")
	edits := flag.Int("edits", 30, "one-line edits per path for the diagnostics-on-write figure")
	out := flag.String("out", "BENCHMARKS.md", "file whose lsp section is rewritten")
	image := flag.String("image", bench.EnvOr("SANDBOXD_TEST_IMAGE", "sandboxd-sandbox:latest"), "sandbox image with gopls")
	smoke := flag.Bool("smoke", false, "one call of each kind; check the section renders without rewriting -out")
	flag.Parse()
	if *smoke {
		*n, *fresh, *edits = 1, 1, 1
	}
	if *n < 1 || *fresh < 1 || *edits < 1 {
		fmt.Fprintf(os.Stderr, "lspbench: -n %d, -fresh %d and -edits %d must each be at least 1\n", *n, *fresh, *edits)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := run(ctx, *n, *fresh, *edits, *out, *image, *smoke); err != nil {
		fmt.Fprintln(os.Stderr, "lspbench:", err)
		os.Exit(1)
	}
}
