// Command lifecyclebench measures the lifecycle (pause, hibernate, resume)
// through sandboxd's HTTP API, as a platform sees it, and rewrites the
// lifecycle section of BENCHMARKS.md:
//
//   - the pause and resume verbs on Docker and containerd;
//   - the first tool call after an automatic pause (the resume included)
//     next to the same call on the running sandbox;
//   - the hibernate and resume verbs and the first call after a
//     hibernation;
//   - a cold `POST /v1/sandboxes` and first call, what a platform without a
//     lifecycle does when a conversation comes back;
//   - the memory and disk of an idle fleet (agent and Python kernel each)
//     running, paused and hibernated, and how many fit on this machine;
//   - snapshots and forks into 1 and 10 copies of a sandbox with 100 MiB
//     and with 1 GiB of random bytes in its workspace: their time, the
//     first call on a copy, and the disk each snapshot and copy takes
//     (Docker; containerd when its backend takes snapshots).
//
// It starts the built sandboxd (bin/sandboxd, `make build`) once per
// backend, Docker first; containerd is measured when its socket exists
// (the image is copied from Docker with scripts/containerd-import.sh).
// Run from the repository root:
//
//	go run ./cmd/lifecyclebench [-out BENCHMARKS.md] [--smoke]
//
// --smoke takes one sample of each (a 4 MiB workspace forked into one
// copy) and checks the section renders, leaving the file alone
// (scripts/test.sh runs it so the command cannot rot).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd"

	"github.com/sandboxd/sandboxd/bench"
)

type flags struct {
	image      string
	out        string
	sandboxd   string
	agent      string
	containerd string // the socket; "" leaves containerd out
	pauses     int
	autos      int
	running    int
	hibernates int
	colds      int
	fleet      int
	snapshots  int
	settle     time.Duration
	smoke      bool
}

func main() {
	var f flags
	flag.StringVar(&f.image, "image", bench.EnvOr("SANDBOXD_TEST_IMAGE", "sandboxd-sandbox:latest"), "sandbox image, in Docker (copied into containerd's sandboxd namespace)")
	flag.StringVar(&f.out, "out", "BENCHMARKS.md", "file whose lifecycle section is rewritten; empty prints it")
	flag.StringVar(&f.sandboxd, "sandboxd", bench.EnvOr("SANDBOXD_BIN", "bin/sandboxd"), "sandboxd binary (make build)")
	flag.StringVar(&f.agent, "agent", bench.EnvOr("SANDBOXD_AGENT_BIN", "bin/sandbox-agent"), "sandbox-agent binary (make build)")
	flag.StringVar(&f.containerd, "containerd", bench.EnvOr("SANDBOXD_CONTAINERD_ADDRESS", "/run/containerd/containerd.sock"), "containerd's socket; measured when it exists, empty leaves containerd out")
	flag.IntVar(&f.pauses, "pauses", 50, "pause and resume cycles per backend")
	flag.IntVar(&f.autos, "autopauses", 20, "automatic pauses per backend, each followed by the read that resumes")
	flag.IntVar(&f.running, "running", 5, "reads of the running sandbox after each automatic pause's read")
	flag.IntVar(&f.hibernates, "hibernations", 15, "hibernation cycles per backend (two hibernations, a resume and a waking read each)")
	flag.IntVar(&f.colds, "colds", 20, "cold creates and first reads per backend")
	flag.IntVar(&f.fleet, "fleet", 10, "idle sandboxes whose memory and disk are read (Docker)")
	flag.IntVar(&f.snapshots, "snapshots", 3, "samples of each snapshot and fork row of the 100 MiB workspace (Docker); the 1 GiB rows take one each")
	flag.DurationVar(&f.settle, "settle", 3*time.Second, "how long the fleet is left idle in each state before its memory is read")
	flag.BoolVar(&f.smoke, "smoke", false, "one sample of each, a fleet of one; check the section renders without rewriting -out")
	flag.Parse()
	if f.smoke {
		f.pauses, f.autos, f.running, f.hibernates, f.colds, f.fleet, f.snapshots, f.settle = 1, 1, 1, 1, 1, 1, 1, 500*time.Millisecond
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"pauses", f.pauses}, {"autopauses", f.autos}, {"running", f.running}, {"hibernations", f.hibernates}, {"colds", f.colds}, {"fleet", f.fleet}, {"snapshots", f.snapshots}} {
		if n.v < 1 || n.v > 10000 {
			fmt.Fprintf(os.Stderr, "lifecyclebench: -%s is %d; give a count from 1 to 10000\n", n.name, n.v)
			os.Exit(2)
		}
	}
	if f.settle < 0 || f.settle > 10*time.Minute {
		fmt.Fprintf(os.Stderr, "lifecyclebench: -settle is %s; give a duration from 0s to 10m\n", f.settle)
		os.Exit(2)
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "lifecyclebench:", err)
		os.Exit(1)
	}
}

// results is everything one run measured.
type results struct {
	Backends   map[string]*backendFigures
	Fleet      fleetFigures
	Workspaces []*workspaceFigures // snapshots and forks on Docker, by size
	Copies     []int               // the copies each fork asked for
	// SnapContainerd says why snapshots were not measured on containerd.
	SnapContainerd string
	Containerd     string // its version, or why it was not measured
	Measured       bool   // whether containerd was
	Sandboxd       string // its version
	Took           time.Duration
}

func run(f flags) error {
	// An interrupt cancels the run instead of ending the program, so each
	// sandboxd is still stopped and what it made deleted (withDaemon).
	sctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithTimeout(sctx, 20*time.Minute)
	defer cancel()
	start := time.Now()
	// Absolute: the engine bind-mounts the agent binary into every sandbox.
	for _, bin := range []*string{&f.sandboxd, &f.agent} {
		if _, err := os.Stat(*bin); err != nil {
			return fmt.Errorf("%s is missing (%v); run `make build` first, or name the binaries with -sandboxd and -agent", *bin, err)
		}
		abs, err := filepath.Abs(*bin)
		if err != nil {
			return err
		}
		*bin = abs
	}
	hostRoot, err := os.MkdirTemp("", "lifecyclebench-ws-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(hostRoot)
	// The cold creates' workspaces are host directories holding the note.
	cfg := fmt.Sprintf("allowed_host_paths: [%q]\n", hostRoot)
	r := results{Backends: map[string]*backendFigures{}}

	err = withDaemon(ctx, f, "docker", cfg, &r, func(d *daemon, out *backendFigures) error {
		if err := measureCalls(ctx, f, d, filepath.Join(hostRoot, "docker"), out); err != nil {
			return err
		}
		var err error
		if r.Fleet, err = measureFleet(ctx, d.Client, f.image, f.fleet, f.settle); err != nil {
			return err
		}
		plan := f.snapshotPlan()
		r.Copies = plan.Copies
		r.Workspaces, err = measureSnapshots(ctx, d.Client, f.image, plan)
		return err
	})
	if err != nil {
		return err
	}

	r.Containerd = "not measured: -containerd is empty"
	if f.containerd != "" {
		if fi, err := os.Stat(f.containerd); err != nil || fi.Mode()&os.ModeSocket == 0 {
			r.Containerd = fmt.Sprintf("not measured: no containerd socket at %s", f.containerd)
		} else {
			if r.Containerd, err = containerdVersion(ctx, f.containerd); err != nil {
				return err
			}
			if err := importImage(ctx, f.containerd, f.image); err != nil {
				return err
			}
			ccfg := cfg + fmt.Sprintf("containerd: {address: %q}\n", f.containerd)
			err = withDaemon(ctx, f, "containerd", ccfg, &r, func(d *daemon, out *backendFigures) error {
				if err := measureCalls(ctx, f, d, filepath.Join(hostRoot, "containerd"), out); err != nil {
					return err
				}
				on, why, err := snapshotsOn(ctx, d.Client)
				switch {
				case err != nil:
					return err
				case on:
					r.SnapContainerd = "not measured: sandboxd on containerd takes snapshots now, but this benchmark reads only Docker's engine for their disk; extend cmd/lifecyclebench/snapshots.go"
				default:
					r.SnapContainerd = "not measured: sandboxd on containerd answers that " + why
				}
				return nil
			})
			if err != nil {
				return err
			}
			r.Measured = true
		}
	}
	if r.SnapContainerd == "" {
		r.SnapContainerd = "not measured: " + strings.TrimPrefix(r.Containerd, "not measured: ")
	}
	r.Took = time.Since(start)

	m, err := bench.DescribeLocalMachine(ctx)
	if err != nil {
		return err
	}
	body := render(f, m, bench.LoadAverage(), time.Now(), r)
	if f.out == "" {
		fmt.Print(body)
		return nil
	}
	return bench.Publish(f.out, "lifecycle", body, f.smoke, os.Stderr)
}

// withDaemon starts sandboxd on backend, runs measure with the backend's
// figures, and stops it (deleting what it leaves) whatever happened.
func withDaemon(ctx context.Context, f flags, backend, cfg string, r *results, measure func(*daemon, *backendFigures) error) (err error) {
	d, err := startDaemon(ctx, f.sandboxd, f.agent, backend, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", backend, err)
	}
	r.Sandboxd = d.Version
	defer func() {
		if serr := d.stop(); serr != nil && err == nil {
			err = fmt.Errorf("%s: %w", backend, serr)
		}
	}()
	out := &backendFigures{}
	r.Backends[backend] = out
	if err := measure(d, out); err != nil {
		return fmt.Errorf("%s: %w", backend, err)
	}
	return nil
}

// measureCalls takes every latency figure of one backend.
func measureCalls(ctx context.Context, f flags, d *daemon, hostRoot string, out *backendFigures) error {
	if err := pauseCycles(ctx, d.Client, f.image, f.pauses, out); err != nil {
		return fmt.Errorf("pause cycles: %w", err)
	}
	if err := hibernateCycles(ctx, d.Client, f.image, f.hibernates, out); err != nil {
		return fmt.Errorf("hibernation cycles: %w", err)
	}
	if err := autoPauseCycles(ctx, d.Client, f.image, f.autos, f.running, out); err != nil {
		return fmt.Errorf("automatic pauses: %w", err)
	}
	if err := coldCycles(ctx, d.Client, f.image, hostRoot, f.colds, out); err != nil {
		return fmt.Errorf("cold creates: %w", err)
	}
	return nil
}

// snapshotPlan is the sizes and copies measured: 100 MiB and 1 GiB, forks
// into 1 and 10 copies (smoke: 4 MiB into one); the 1 GiB rows take one
// sample each, which keeps the family's run within minutes.
func (f flags) snapshotPlan() snapshotPlan {
	if f.smoke {
		return snapshotPlan{Sizes: []int64{4 << 20}, Copies: []int{1}, Samples: func(int64) int { return 1 }}
	}
	return snapshotPlan{Sizes: []int64{100 << 20, 1 << 30}, Copies: []int{1, 10}, Samples: func(size int64) int {
		if size >= 1<<30 {
			return 1
		}
		return f.snapshots
	}}
}

// containerdVersion asks containerd at addr for its version.
func containerdVersion(ctx context.Context, addr string) (string, error) {
	c, err := containerd.New(addr, containerd.WithTimeout(10*time.Second))
	if err != nil {
		return "", fmt.Errorf("containerd at %s does not answer: %w", addr, err)
	}
	defer c.Close()
	v, err := c.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("containerd at %s does not tell its version: %w", addr, err)
	}
	return "containerd " + v.Version, nil
}

// importImage copies the image from Docker into containerd's sandboxd
// namespace where it is missing or another build, as the e2e tests do.
func importImage(ctx context.Context, addr, image string) error {
	ictx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ictx, "scripts/containerd-import.sh", image)
	cmd.Env = append(os.Environ(), "CONTAINERD_ADDRESS="+addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("scripts/containerd-import.sh %s (run from the repository root): %v\n%s", image, err, out)
	}
	return nil
}
