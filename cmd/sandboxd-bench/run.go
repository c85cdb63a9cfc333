package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dockerclient "github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
)

// sweepTimeout bounds the final removal of this run's containers; a few
// hundred take a minute or two on a busy engine.
const sweepTimeout = 5 * time.Minute

// env is what every benchmark shares.
type env struct {
	opts       options
	docker     *dockerclient.Client
	machine    bench.Machine
	runID      string // names this run's conversations and peer containers
	convPrefix string
	log        io.Writer
}

// conversation names sandbox i of benchmark kind.
func (e *env) conversation(kind string, i int) string {
	return fmt.Sprintf("%s%s-%d", e.convPrefix, kind, i)
}

// sandboxd is one benchmark's daemon and a client of it.
type sandboxd struct {
	*bench.Daemon
	api *client.Client
}

func run(ctx context.Context, args []string, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("the Docker client cannot be configured from the environment: %w; check DOCKER_HOST", err)
	}
	defer cli.Close()
	machine, err := bench.DescribeMachine(ctx, cli)
	if err != nil {
		return fmt.Errorf("%w; start a Docker engine (the benchmark measures the docker backend)", err)
	}
	if _, err := cli.ImageInspect(ctx, o.image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return usagef("image %s is not on the Docker engine; build it with `make images` or pass --image sandboxd-base:bookworm", o.image)
		}
		return fmt.Errorf("image %s cannot be inspected: %w", o.image, err)
	}
	if o.sandboxdBin == "" || o.agentBin == "" {
		dir, err := os.MkdirTemp("", "sandboxd-bench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := buildBinaries(ctx, &o, dir, stderr); err != nil {
			return err
		}
	}
	for _, p := range []*string{&o.sandboxdBin, &o.agentBin} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}

	var id [4]byte
	_, _ = rand.Read(id[:])
	e := &env{opts: o, docker: cli, machine: machine, runID: hex.EncodeToString(id[:]), log: stderr}
	e.convPrefix = "bench-" + e.runID + "-"
	progress(stderr, "run %s on %s; image %s", e.runID, machine, o.image)
	defer func() {
		// A fresh context: the run's own may be cancelled by an interrupt,
		// and this is exactly when the containers must still go.
		sctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
		defer cancel()
		n, serr := sweep(sctx, cli, e.convPrefix, e.runID, 8)
		if n > 0 {
			progress(stderr, "removed %d leftover containers of this run", n)
		}
		err = errors.Join(err, serr)
	}()

	for _, name := range allBenches {
		if !o.runs(name) {
			continue
		}
		section, err := runOne(ctx, e, name)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("benchmark %s interrupted; %s is left as it was", name, o.out)
			}
			return fmt.Errorf("benchmark %s: %w", name, err)
		}
		if o.smoke {
			if err := bench.CheckSmoke(o.out, name, bench.WithStamp(section), stderr); err != nil {
				return err
			}
			continue
		}
		if err := writeSection(o.out, name, bench.WithStamp(section)); err != nil {
			return err
		}
		progress(stderr, "%s: written to %s", name, o.out)
	}
	return nil
}

// runOne gives the benchmark a fresh sandboxd (so that one benchmark's
// leftovers do not weigh on the next, and memory starts from a clean
// daemon) and stops it afterwards.
func runOne(ctx context.Context, e *env, name string) (section string, err error) {
	d, err := bench.StartDaemon(ctx, bench.DaemonOptions{
		Binary:        e.opts.sandboxdBin,
		Agent:         e.opts.agentBin,
		DataDirPrefix: "sandboxd-bench-",
		BinaryHint:    "build it with `make build` or leave --sandboxd unset",
	})
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, d.Stop()) }()
	api, err := client.New(d.URL, d.Token)
	if err != nil {
		return "", err
	}
	sd := &sandboxd{Daemon: d, api: api}
	progress(e.log, "%s: sandboxd %s (pid %d) serving on %s", name, d.Version, d.Pid(), d.URL)
	switch name {
	case benchCreate:
		r, err := runCreate(ctx, e, sd)
		if err != nil {
			return "", err
		}
		return renderCreate(e, sd, r), nil
	case benchRead4K:
		r, err := runRead4K(ctx, e, sd)
		if err != nil {
			return "", err
		}
		return renderRead4K(e, sd, r), nil
	case benchIdle:
		r, err := runIdle(ctx, e, sd)
		if err != nil {
			return "", err
		}
		return renderIdle(e, sd, r), nil
	case benchLoad:
		r, err := runLoad(ctx, e, sd)
		if err != nil {
			return "", err
		}
		return renderLoad(e, sd, r), nil
	}
	return "", fmt.Errorf("no benchmark is named %q", name)
}

// buildBinaries builds whichever of sandboxd and the agent was not given.
func buildBinaries(ctx context.Context, o *options, dir string, stderr io.Writer) error {
	builds := []struct {
		target *string
		name   string
		pkg    string
		env    []string
	}{
		{&o.sandboxdBin, "sandboxd", "./cmd/sandboxd", nil},
		{&o.agentBin, "sandbox-agent", "./cmd/sandbox-agent", []string{"CGO_ENABLED=0"}},
	}
	for _, b := range builds {
		if *b.target != "" {
			continue
		}
		out := filepath.Join(dir, b.name)
		progress(stderr, "building %s from %s", b.name, b.pkg)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, b.pkg)
		cmd.Env = append(os.Environ(), b.env...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s cannot be built (%v): %s; run from the repository root, or pass --sandboxd and --agent", b.pkg, err, msg)
		}
		*b.target = out
	}
	return nil
}

// writeSection replaces (or appends) one benchmark's section of the report,
// writing through a temporary file so an interrupted write leaves the old
// report whole.
func writeSection(path, name, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the report %s cannot be read: %w", path, err)
	}
	doc := string(old)
	if doc == "" {
		doc = reportPreamble
	}
	doc, err = bench.ReplaceSection(doc, name, section)
	if err != nil {
		return fmt.Errorf("the report %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-*.md")
	if err != nil {
		return fmt.Errorf("the report %s cannot be written: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(doc); err != nil {
		tmp.Close()
		return fmt.Errorf("the report %s cannot be written: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
