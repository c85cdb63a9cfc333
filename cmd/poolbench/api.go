package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
)

// apiRun measures through a real sandboxd: `POST /v1/sandboxes` until
// 201, a claim (the pooled image with the defaults) next to a cold create
// (the same image asking for a memory limit, which no pool sandbox has),
// alternating, in one sandboxd whose deployment is dep.
func apiRun(ctx context.Context, f flags, agentBin, dep string) (cold, warm []time.Duration, err error) {
	dir, err := os.MkdirTemp("", "sandboxd-pool-bench-api-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("deployment: %s\npools:\n  - {image: %q, size: %d}\n", dep, f.image, f.size)), 0o600); err != nil {
		return nil, nil, err
	}
	data := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, f.sandboxd, "serve", "--listen", "127.0.0.1:0", "--data-dir", data,
		"--backend", "docker", "--agent-binary", agentBin, "--config", cfg)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "serving on "); ok {
				if fs := strings.Fields(rest); len(fs) > 0 {
					select {
					case urlc <- fs[0]:
					default:
					}
				}
			}
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(60 * time.Second):
		return nil, nil, fmt.Errorf("%s printed no URL within 60s", f.sandboxd)
	}
	tok, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(url, strings.TrimSpace(string(tok)))
	if err != nil {
		return nil, nil, err
	}
	series := fmt.Sprintf("sandboxd_pool_ready{image=%q}", f.image)
	waitFull := func() error {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if v, err := metric(ctx, url, series); err == nil && v >= float64(f.size) {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return fmt.Errorf("the pool of sandboxd did not refill to %d within 2 minutes", f.size)
	}
	timed := func(req api.CreateSandboxRequest, into *[]time.Duration) error {
		start := time.Now()
		sb, err := c.CreateSandbox(ctx, req)
		d := time.Since(start)
		if err != nil {
			return err
		}
		*into = append(*into, d)
		return c.DeleteSandbox(ctx, sb.ID)
	}
	for i := range f.rounds {
		if err := timed(api.CreateSandboxRequest{Conversation: "api-cold-" + strconv.Itoa(i), Image: f.image,
			Resources: &api.Resources{MemoryMB: coldMemoryMB}}, &cold); err != nil {
			return nil, nil, fmt.Errorf("cold create %d through the API: %w", i, err)
		}
		if err := waitFull(); err != nil {
			return nil, nil, err
		}
		if err := timed(api.CreateSandboxRequest{Conversation: "api-warm-" + strconv.Itoa(i), Image: f.image}, &warm); err != nil {
			return nil, nil, fmt.Errorf("claim %d through the API: %w", i, err)
		}
	}
	claimed := fmt.Sprintf("sandboxd_pool_claims_total{image=%q,outcome=%q}", f.image, "claimed")
	if v, err := metric(ctx, url, claimed); err != nil || v != float64(f.rounds) {
		return nil, nil, fmt.Errorf("sandboxd counted %v claims (%v), want %d: the figures would mix cold creates in", v, err, f.rounds)
	}
	return cold, warm, nil
}

// coldMemoryMB is the memory limit the API's cold creates ask for: any
// limit keeps a create off the pool (env does not: a claim sets it).
const coldMemoryMB = 768

// metric reads one series off /metrics.
func metric(ctx context.Context, url, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no series %s", series)
}
