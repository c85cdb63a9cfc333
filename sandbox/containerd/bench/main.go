// Command bench measures the containerd backend next to the Docker backend
// in the same run, on the same image and agent binary, and rewrites the
// containerd section of BENCHMARKS.md:
//
//   - create-to-ready: Manager.Create until the first agent call answered;
//   - a tool call on the open agent pipe (read a 4 KiB file), p50/p90/p99;
//   - the same call over a fresh exec each time (AttachAgent, handshake,
//     read, close), what a backend without a kept pipe would pay.
//
// Run from the repository root (the image must be in Docker and, for
// containerd, imported: scripts/containerd-import.sh):
//
//	go run ./sandbox/containerd/bench [-image sandboxd-sandbox:latest] [-out BENCHMARKS.md]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/containerd"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

type flags struct {
	image   string
	out     string
	creates int
	calls   int
	fresh   int
}

func main() {
	var f flags
	flag.StringVar(&f.image, "image", "sandboxd-sandbox:latest", "sandbox image (in Docker, and imported into containerd)")
	flag.StringVar(&f.out, "out", "BENCHMARKS.md", "file whose containerd section is rewritten; empty prints it")
	flag.IntVar(&f.creates, "creates", 5, "sandboxes created per backend")
	flag.IntVar(&f.calls, "calls", 1000, "tool calls on the open pipe per backend")
	flag.IntVar(&f.fresh, "fresh", 50, "tool calls over a fresh exec per backend")
	flag.Parse()
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// figures are one backend's measurements.
type figures = bench.BackendFigures

func run(f flags) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "sandboxd-ctd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	agentBin, err := sandboxtest.BuildAgent(dir)
	if err != nil {
		return err
	}
	db, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(f.image))
	if err != nil {
		return err
	}
	defer db.Close()
	cb, err := containerd.New(containerd.WithAgentBinary(agentBin), containerd.WithDataDir(filepath.Join(dir, "data")), containerd.WithDefaultImage(f.image))
	if err != nil {
		return err
	}
	defer cb.Close()
	if _, err := cb.SyncFromDocker(ctx, f.image); err != nil {
		return err
	}

	backends := []sandbox.Backend{db, cb}
	got, err := bench.CompareBackends(ctx, backends, f.image, f.creates, f.calls, f.fresh)
	if err != nil {
		return err
	}
	m, err := bench.DescribeLocalMachine(ctx)
	if err != nil {
		return err
	}
	v, err := cb.Client().Version(ctx)
	if err != nil {
		return err
	}
	body := report(f, m, v.Version, got)
	if f.out == "" {
		fmt.Print(body)
		return nil
	}
	return bench.WriteSection(f.out, "containerd", body)
}

func report(f flags, machine, ctdVersion string, got map[string]*figures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## containerd backend next to the Docker backend\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; containerd %s; load average at the end %s; image `%s`._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine, ctdVersion, bench.LoadAverage(), f.image)
	fmt.Fprintf(&b, "| figure | backend | n | p50 | p90 | p99 | max |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(what, backend string, s []time.Duration) {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", what, backend, len(s),
			bench.Ms(bench.Percentile(s, 50)), bench.Ms(bench.Percentile(s, 90)), bench.Ms(bench.Percentile(s, 99)), bench.Ms(bench.Percentile(s, 100)))
	}
	for _, k := range []struct{ what, field string }{
		{"create until the first agent answer (Manager.Create, pipe attached, one stat)", "create"},
		{"read a 4 KiB file on the open agent pipe", "pipe"},
		{"the same read over a fresh exec (attach, handshake, read, close)", "fresh"},
	} {
		for _, name := range []string{"docker", "containerd"} {
			g := got[name]
			s := map[string][]time.Duration{"create": g.Create, "pipe": g.Pipe, "fresh": g.Fresh}[k.field]
			row(k.what, name, s)
		}
	}
	dp, cp := bench.Percentile(got["docker"].Pipe, 50), bench.Percentile(got["containerd"].Pipe, 50)
	cf := bench.Percentile(got["containerd"].Fresh, 50)
	diff := cp - dp
	if diff < 0 {
		diff = -diff
	}
	checks := []bench.Check{
		{Target: "containerd pipe p50 within 1 ms of Docker's (the pipe is opened once)", Got: fmt.Sprintf("%s vs %s (difference %s)", bench.Ms(cp), bench.Ms(dp), bench.Ms(diff)), Met: cp > 0 && dp > 0 && diff < time.Millisecond},
		bench.RatioAtLeast("containerd pipe p50 at least 20x faster than a fresh exec per call", cf, cp, 20),
	}
	fmt.Fprintf(&b, "\n| target (issue 8) | measured | result |\n| --- | --- | --- |\n")
	for _, c := range checks {
		fmt.Fprintf(&b, "| %s | %s | **%s** |\n", c.Target, c.Got, c.Mark())
	}
	fmt.Fprintf(&b, "\nHow: `go run ./sandbox/containerd/bench`; both backends in one process with the same agent binary; creates interleaved (docker, containerd, ...), %d each; then %d reads on the open pipe and %d over fresh execs per backend, one sandbox each.\n", f.creates, f.calls, f.fresh)
	return b.String()
}
