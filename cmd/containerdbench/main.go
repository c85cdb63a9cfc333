// Command containerdbench measures the containerd backend next to the Docker backend
// in the same run, on the same image and agent binary, and rewrites the
// containerd section of BENCHMARKS.md:
//
//   - create-to-ready: Manager.Create until the first agent call returned;
//   - a tool call on the open agent pipe (read a 4 KiB file), p50/p90/p99;
//   - the same call over a fresh exec each time (AttachAgent, handshake,
//     read, close), what a backend without a kept pipe would pay.
//
// Run from the repository root (the image must be in Docker and, for
// containerd, imported: scripts/containerd-import.sh):
//
//	go run ./cmd/containerdbench [-image sandboxd-sandbox:latest] [-out BENCHMARKS.md] [--smoke]
//
// --smoke measures one of each and checks the section renders, leaving the
// file alone (scripts/test.sh runs it so the command cannot rot).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
	smoke   bool
}

func main() {
	var f flags
	flag.StringVar(&f.image, "image", "sandboxd-sandbox:latest", "sandbox image (in Docker, and imported into containerd)")
	flag.StringVar(&f.out, "out", "BENCHMARKS.md", "file whose containerd section is rewritten; empty prints it")
	flag.IntVar(&f.creates, "creates", 5, "sandboxes created per backend")
	flag.IntVar(&f.calls, "calls", 1000, "tool calls on the open pipe per backend")
	flag.IntVar(&f.fresh, "fresh", 50, "tool calls over a fresh exec per backend")
	flag.BoolVar(&f.smoke, "smoke", false, "one create, call and fresh exec per backend; check the section renders without rewriting -out")
	flag.Parse()
	if f.smoke {
		f.creates, f.calls, f.fresh = 1, 1, 1
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "containerdbench:", err)
		os.Exit(1)
	}
}

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
	body := report(f, v.Version).Render(m, got)
	if f.out == "" {
		fmt.Print(body)
		return nil
	}
	return bench.Publish(f.out, "containerd", body, f.smoke, os.Stderr)
}

// report words the containerd section; the measurement and the table are
// bench's, shared with cmd/kubebench.
func report(f flags, ctdVersion string) bench.BackendReport {
	return bench.BackendReport{
		Backend:     "containerd",
		Title:       "containerd backend next to the Docker backend",
		Setting:     fmt.Sprintf("containerd %s; image `%s`", ctdVersion, f.image),
		FreshWhat:   "attach, handshake, read, close",
		PipeTarget:  "containerd pipe p50 within 1 ms of Docker's (the pipe is opened once)",
		FreshTarget: "containerd pipe p50 at least 20x faster than a fresh exec per call",
		How:         "`go run ./cmd/containerdbench` (`make bench`), the same agent binary for both",
		Creates:     f.creates, Calls: f.calls, Fresh: f.fresh,
	}
}
