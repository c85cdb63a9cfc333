// Command poolbench measures a warm-pool claim next to a cold create on
// one backend in the same run, and rewrites the pools section of
// BENCHMARKS.md (pools-kubernetes with -backend kubernetes). Two
// deployments share the engine: one keeps a pool of the image, the other
// has none. Each round makes one cold sandbox, claims one warm one and
// claims another asking for one env variable (each after the pool has
// refilled, as in a steady state where claims come slower than the
// refill), each timed until Manager.Create returned and until the first
// agent call returned, and deletes them.
//
// With -sandboxd (default bin/sandboxd, after `make build`; Docker only) it
// measures the same through a real sandboxd too: `POST /v1/sandboxes` until
// 201, a claim next to a cold create (the same image asking for a memory
// limit, which no pool sandbox has), in one sandboxd.
//
// Run from the repository root with the image in Docker:
//
//	go run ./cmd/poolbench [-image sandboxd-sandbox:latest] [-rounds 20] [-out BENCHMARKS.md]
//
// or, with a cluster up (scripts/k8s-up.sh; source /var/lib/sandboxd-k8s/env,
// which sets KUBECONFIG and SANDBOXD_TEST_K8S_AGENT_IMAGE):
//
//	go run ./cmd/poolbench -backend kubernetes
//
// A smoke run (-smoke) of -backend kubernetes without KUBECONFIG says why it
// skips and exits 0: the test command's smoke run works without a cluster.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/kubernetes"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

type flags struct {
	backend    string
	agentImage string
	image      string
	out        string
	rounds     int
	smoke      bool
	size       int
	sandboxd   string
}

func main() {
	var f flags
	flag.StringVar(&f.backend, "backend", "docker", "docker, or kubernetes (KUBECONFIG set; writes the pools-kubernetes section, no API figures)")
	flag.StringVar(&f.agentImage, "agent-image", bench.EnvOr("SANDBOXD_TEST_K8S_AGENT_IMAGE", kubernetes.DefaultAgentImage), "kubernetes: image carrying sandbox-agent, imported into the node")
	flag.StringVar(&f.image, "image", "sandboxd-sandbox:latest", "sandbox image, in Docker (and imported into the node)")
	flag.StringVar(&f.out, "out", "BENCHMARKS.md", "file whose pools section is rewritten; empty prints it")
	flag.IntVar(&f.rounds, "rounds", 20, "cold creates and claims, one of each per round")
	flag.IntVar(&f.size, "size", 2, "pool size")
	flag.StringVar(&f.sandboxd, "sandboxd", "bin/sandboxd", "sandboxd binary for the API figures; empty skips them")
	flag.BoolVar(&f.smoke, "smoke", false, "2 rounds; check the section renders without rewriting -out")
	flag.Parse()
	if f.smoke {
		f.rounds = min(f.rounds, 2)
	}
	if f.backend == "kubernetes" && f.smoke && os.Getenv("KUBECONFIG") == "" {
		fmt.Fprintln(os.Stderr, "poolbench: smoke run of -backend kubernetes skipped: KUBECONFIG is not set (bring a cluster up with scripts/k8s-up.sh and source /var/lib/sandboxd-k8s/env)")
		return
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "poolbench:", err)
		os.Exit(1)
	}
}

// figures are the samples of one way to get a sandbox.
type figures struct {
	create, first, api []time.Duration
}

// benchEnv is what the claims with env ask for.
var benchEnv = map[string]string{"POOLBENCH": "claimed"}

func run(f flags) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	agentBin := os.Getenv("SANDBOXD_AGENT_BIN")
	if agentBin == "" {
		dir, err := os.MkdirTemp("", "sandboxd-pool-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if agentBin, err = sandboxtest.BuildAgent(dir); err != nil {
			return err
		}
	}
	tag := randHex(4)
	section := "pools"
	newBackend := func(dep string) (sandbox.Backend, error) {
		return docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(f.image),
			docker.WithDeployment(sandbox.Deployment{Name: "poolbench-" + tag + "-" + dep}))
	}
	switch f.backend {
	case "docker":
	case "kubernetes":
		kube, done, err := kubeBackends(ctx, f)
		if err != nil {
			return err
		}
		defer done()
		newBackend = func(dep string) (sandbox.Backend, error) { return kube("poolbench-" + tag + "-" + dep) }
		section, f.sandboxd = "pools-kubernetes", ""
	default:
		return fmt.Errorf("-backend %q is not known; use docker or kubernetes", f.backend)
	}
	pb, err := newBackend("pool")
	if err != nil {
		return err
	}
	cb, err := newBackend("cold")
	if err != nil {
		return err
	}
	defer cleanup(pb, cb)

	pm := sandbox.NewManager(pb, sandbox.WithPools(sandbox.PoolSpec{Image: f.image, Size: f.size}))
	cm := sandbox.NewManager(cb)
	for _, m := range []*sandbox.Manager{pm, cm} {
		if err := m.Start(ctx); err != nil {
			return err
		}
		defer m.Close()
	}

	cold, warm, withEnv := &figures{}, &figures{}, &figures{}
	for i := range f.rounds {
		if err := once(ctx, cm, fmt.Sprintf("cold-%d", i), f.image, nil, cold); err != nil {
			return fmt.Errorf("cold create %d: %w", i, err)
		}
		if err := waitFull(ctx, pm, f.image, f.size); err != nil {
			return err
		}
		if err := once(ctx, pm, fmt.Sprintf("warm-%d", i), f.image, nil, warm); err != nil {
			return fmt.Errorf("claim %d: %w", i, err)
		}
		if err := waitFull(ctx, pm, f.image, f.size); err != nil {
			return err
		}
		if err := once(ctx, pm, fmt.Sprintf("env-%d", i), f.image, benchEnv, withEnv); err != nil {
			return fmt.Errorf("claim with env %d: %w", i, err)
		}
	}
	var st sandbox.PoolStat
	for _, s := range pm.PoolStats() {
		st = s
	}
	if st.Claims[sandbox.PoolClaimed] != uint64(2*f.rounds) {
		return fmt.Errorf("only %d of %d creates were claims (%+v); the figures would mix cold creates in", st.Claims[sandbox.PoolClaimed], 2*f.rounds, st.Claims)
	}
	if f.sandboxd != "" {
		pm.Close()
		cm.Close()
		apiDep := "poolbench-" + tag + "-api"
		ab, err := newBackend("api")
		if err != nil {
			return err
		}
		defer cleanup(ab)
		if cold.api, warm.api, err = apiRun(ctx, f, agentBin, apiDep); err != nil {
			return err
		}
	}
	m, err := bench.DescribeLocalMachine(ctx)
	if err != nil {
		return err
	}
	body := report(f, m, cold, warm, withEnv)
	if f.out == "" {
		fmt.Print(body)
		return nil
	}
	return bench.Publish(f.out, section, body, f.smoke, os.Stderr)
}

// once creates (or claims) one sandbox for conv with env, times it until
// Create returned and until the first agent call returned, and deletes it.
// With env, that call is a command printing the env, which must show it.
func once(ctx context.Context, m *sandbox.Manager, conv, image string, env map[string]string, into *figures) error {
	const tenant = "bench"
	start := time.Now()
	info, err := m.Create(ctx, sandbox.Spec{Tenant: tenant, Conversation: conv, Image: image, Network: "none", Env: env})
	if err != nil {
		return err
	}
	created := time.Since(start)
	c, _, err := m.Agent(ctx, tenant, conv)
	switch {
	case err != nil:
	case len(env) == 0:
		_, err = c.Stat(ctx, &proto.StatRequest{Root: info.Workspace, Path: "."})
	default:
		var r *proto.ExecResponse
		r, err = c.Exec(ctx, &proto.ExecRequest{Argv: []string{"printenv", "POOLBENCH"}})
		if err == nil && strings.TrimSpace(string(r.Stdout)) != env["POOLBENCH"] {
			err = fmt.Errorf("the claimed sandbox's POOLBENCH is %q, want %q", strings.TrimSpace(string(r.Stdout)), env["POOLBENCH"])
		}
	}
	first := time.Since(start)
	if derr := m.Delete(ctx, tenant, info.ID); err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	into.create = append(into.create, created)
	into.first = append(into.first, first)
	return nil
}

func waitFull(ctx context.Context, m *sandbox.Manager, image string, size int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for _, s := range m.PoolStats() {
			if s.Image == image && s.Ready >= size {
				return nil
			}
			if s.Image == image && s.Problem != "" && time.Now().After(deadline) {
				return errors.New(s.Problem)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the pool did not refill to %d within 2 minutes", size)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// cleanup removes what the run left: the pool's unclaimed sandboxes (a
// closed Manager leaves them for its next start).
func cleanup(bs ...sandbox.Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, b := range bs {
		infos, err := b.List(ctx)
		if err != nil {
			continue
		}
		for _, i := range infos {
			_ = b.Remove(ctx, i.ID)
		}
		if c, ok := b.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
