package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/bench"
)

func run(ctx context.Context, o opts) error {
	start := time.Now()
	st, err := newStack(ctx, o.image)
	if err != nil {
		return err
	}
	defer st.close()
	var diags []diagFigures
	for _, c := range langCases {
		for _, watch := range []bool{true, false} {
			n := o.n
			if !watch {
				n = min(n, 3) // each costs the whole wait
			}
			f, err := measureDiag(ctx, st, c, watch, n, o.peerWait)
			if err != nil {
				return fmt.Errorf("%s (watch %v): %w", c.name, watch, err)
			}
			fmt.Printf("%s watch=%v: %d fresh of %d, stale %d, pending %d\n", c.name, watch, len(f.samples), f.edits, f.stale, f.pending)
			diags = append(diags, f)
		}
	}
	cost, err := measureCost(ctx, st, o.files, o.checkout, o.idle)
	if err != nil {
		return fmt.Errorf("watch cost: %w", err)
	}
	return report(ctx, o, diags, cost, time.Since(start))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func pct(cpu, wall time.Duration) string {
	return fmt.Sprintf("%.2f %%", 100*cpu.Seconds()/wall.Seconds())
}

func report(ctx context.Context, o opts, diags []diagFigures, c costFigures, elapsed time.Duration) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	m, err := bench.DescribeMachine(ctx, cli)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("## watch: changes made outside the write tools\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; load average at the end %s; image `%s`; %s._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), m, bench.LoadAverage(), o.image, runtime.Version())
	b.WriteString("Time from a `sed -i` of a dependency (through the agent's exec, as `shell` runs it) until `lsp diagnostics` on its consumer shows the new error:\n\n")
	b.WriteString("| server | path | edits | fresh in time | p50 | p90 | max | stale \"no problems\" answers | \"pending\" answers |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, d := range diags {
		s := bench.Summarize(d.samples)
		path := "**sandboxd with the watch** (didChangeWatchedFiles, open files re-sent, fresh only after the change)"
		if !d.watch {
			path = fmt.Sprintf("**peer**: without the watch (the behaviour before it), polled every 50 ms up to %s", o.peerWait)
		}
		p50, p90, mx := "—", "—", "—"
		if s.N > 0 {
			p50, p90, mx = bench.Ms(s.P50), bench.Ms(s.P90), bench.Ms(s.Max)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %d | %d |\n", d.c.name, path, d.edits, s.N, p50, p90, mx, d.stale, d.pending)
	}
	b.WriteString("\nThe agent (sandbox-agent daemon, its own CPU time from /proc) with a workspace of ")
	fmt.Fprintf(&b, "%d files in %d watched directories (a git repository; `.git` is not watched):\n\n", c.files, c.dirs)
	b.WriteString("| figure | not watching | watching |\n| --- | ---: | ---: |\n")
	fmt.Fprintf(&b, "| CPU idle (%s window) | %s | %s |\n", c.idle, pct(c.idleCPUNo, c.idle), pct(c.idleCPU, c.idle))
	fmt.Fprintf(&b, "| resident memory, idle | %s | %s |\n", mib(c.rssNo), mib(c.rss))
	fmt.Fprintf(&b, "| `git checkout` of %d changed files: its own time | %s | %s |\n", c.changed, bench.Ms(c.coWallNo), bench.Ms(c.coWall))
	fmt.Fprintf(&b, "| agent CPU time from the checkout's start to 3 s after its end | %s | %s |\n", bench.Ms(c.coCPUNo), bench.Ms(c.coCPU))
	fmt.Fprintf(&b, "| resident memory after the checkout | — | %s |\n", mib(c.rssAfter))
	fmt.Fprintf(&b, "\nStarting the watch (every directory added, from Subscribe to the first answered flush) took %s. The checkout reached the subscriber as %d batch(es), %d of them \"many files changed\" resyncs; the last was handled %s after the checkout's exec returned (negative: before).\n\n",
		bench.Ms(c.setup), c.events, c.resyncs, bench.Ms(c.lastEvent))
	fmt.Fprintf(&b, "How: `go run ./cmd/watchbench` (after `make build`, with `SANDBOXD_AGENT_BIN=bin/sandbox-agent`) creates Docker sandboxes through the sandbox manager. Diagnostics: per server and path a sandbox of its own with the fixture of `tools/lsp/testdata`, an lsp manager with the watch on or off and the `lsp` tool in a registry; after the consumer reports clean, each edit is a `sed -i` through the agent's exec that adds a parameter to the dependency's function; the clock starts when the exec returns and stops when a `lsp diagnostics` call on the consumer names the missing argument (calls back to back, 50 ms apart); a `sed` back and a clean answer (untimed) come before the next edit. An answer \"no problems\" in between is a stale one, counted. Cost: one sandbox, a tree of %d small Go files made by a script and committed, a branch changing %d of them; the agent's CPU time (utime+stime of the daemon, not of the commands it runs) over an idle window and from a checkout's start to 3 s after its end, first without a watch, then with one subscription to the workspace. %s in all.\n",
		c.files, c.changed, elapsed.Round(time.Second))
	if err := bench.Publish(o.out, "watch", b.String(), o.smoke, os.Stderr); err != nil {
		return err
	}
	fmt.Print(b.String())
	return nil
}
