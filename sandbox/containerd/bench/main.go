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

	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
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
type figures struct {
	create, pipe, fresh []time.Duration
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
	got := map[string]*figures{}
	for _, b := range backends {
		got[b.Name()] = &figures{}
	}
	tenant := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	// Interleaved, so both backends see the same machine load.
	for i := range f.creates {
		for _, b := range backends {
			d, err := createToReady(ctx, b, tenant, fmt.Sprintf("c%d", i), f.image)
			if err != nil {
				return fmt.Errorf("%s create: %w", b.Name(), err)
			}
			got[b.Name()].create = append(got[b.Name()].create, d)
		}
	}
	for _, b := range backends {
		if err := calls(ctx, b, tenant, f, got[b.Name()]); err != nil {
			return fmt.Errorf("%s calls: %w", b.Name(), err)
		}
	}
	m, err := describe(ctx)
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
	doc, err := os.ReadFile(f.out)
	if err != nil {
		return err
	}
	nd, err := bench.ReplaceSection(string(doc), "containerd", body)
	if err != nil {
		return err
	}
	return os.WriteFile(f.out, []byte(nd), 0o644)
}

// createToReady creates a sandbox through a Manager and waits for the first
// agent answer, then removes it.
func createToReady(ctx context.Context, b sandbox.Backend, tenant, conv, image string) (time.Duration, error) {
	m := sandbox.NewManager(b)
	if err := m.Start(ctx); err != nil {
		return 0, err
	}
	defer m.Close()
	start := time.Now()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: conv, Image: image})
	if err != nil {
		return 0, err
	}
	defer b.Remove(context.WithoutCancel(ctx), info.ID)
	c, _, err := m.Agent(ctx, tenant, conv)
	if err == nil {
		_, err = c.Stat(ctx, &proto.StatRequest{Root: info.Workspace, Path: "."})
	}
	return time.Since(start), err
}

// calls measures reads on the open pipe and over fresh execs.
func calls(ctx context.Context, b sandbox.Backend, tenant string, f flags, out *figures) error {
	m := sandbox.NewManager(b)
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer m.Close()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: "calls", Image: f.image})
	if err != nil {
		return err
	}
	defer b.Remove(context.WithoutCancel(ctx), info.ID)
	c, _, err := m.Agent(ctx, tenant, "calls")
	if err != nil {
		return err
	}
	data := []byte(strings.Repeat("0123456789abcdef", 256))
	if err := c.WriteFiles(ctx, &proto.WriteFilesRequest{Root: info.Workspace, Files: []proto.WriteFile{{Path: "bench.txt", Data: data}}}); err != nil {
		return err
	}
	read := func(c *agent.Client) error {
		r, err := c.ReadFile(ctx, &proto.ReadFileRequest{Root: info.Workspace, Path: "bench.txt"})
		if err == nil && len(r.Data) != len(data) {
			err = fmt.Errorf("read %d bytes, want %d", len(r.Data), len(data))
		}
		return err
	}
	for range 20 { // warm-up
		if err := read(c); err != nil {
			return err
		}
	}
	for range f.calls {
		t := time.Now()
		if err := read(c); err != nil {
			return err
		}
		out.pipe = append(out.pipe, time.Since(t))
	}
	for range f.fresh {
		t := time.Now()
		rwc, err := b.AttachAgent(ctx, info.ID)
		if err != nil {
			return err
		}
		fc, err := agent.NewClient(ctx, rwc)
		if err == nil {
			err = read(fc)
			fc.Close()
		}
		rwc.Close()
		if err != nil {
			return err
		}
		out.fresh = append(out.fresh, time.Since(t))
	}
	return nil
}

func describe(ctx context.Context) (string, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", err
	}
	defer cli.Close()
	m, err := bench.DescribeMachine(ctx, cli)
	if err != nil {
		return "", err
	}
	return m.String(), nil
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
			s := map[string][]time.Duration{"create": g.create, "pipe": g.pipe, "fresh": g.fresh}[k.field]
			row(k.what, name, s)
		}
	}
	dp, cp := bench.Percentile(got["docker"].pipe, 50), bench.Percentile(got["containerd"].pipe, 50)
	cf := bench.Percentile(got["containerd"].fresh, 50)
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
