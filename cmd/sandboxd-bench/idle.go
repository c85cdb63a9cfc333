package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
)

// dockerPidFile is where dockerd records its pid on Debian.
const dockerPidFile = "/var/run/docker.pid"

// idleResult is the memory of sandboxd (and, for scale, of dockerd and the
// containers) at each stage of mapping many idle sandboxes.
type idleResult struct {
	n                                 int
	rssStart, rssMapped, rssPipes     int64
	rssIdle                           int64
	anonStart, anonIdle               int64 // the private part (RssAnon)
	dockerdStart, dockerdIdle         int64 // 0 when dockerd's pid is not readable
	containerTotal, containerMax      int64
	containerSampled                  int
	createTime, pipesTime, deleteTime time.Duration
}

// runIdle maps N sandboxes, opens each one's agent pipe with one tool call,
// lets them sit, and reads the memory at each stage.
func runIdle(ctx context.Context, e *env, sd *sandboxd) (r idleResult, err error) {
	r.n = e.opts.idle
	pid := sd.Pid()
	// A moment for the daemon's start-up allocations to settle.
	if err := sleep(ctx, time.Second); err != nil {
		return r, err
	}
	r.anonStart, _ = bench.AnonRSS(pid)
	if r.rssStart, err = bench.RSS(pid); err != nil {
		return r, err
	}
	r.dockerdStart = dockerdRSS()

	ids := make([]string, r.n)
	var done atomic.Int64
	t0 := time.Now()
	err = forEach(ctx, r.n, e.opts.idleParallel, func(ctx context.Context, i int) error {
		sb, err := sd.api.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: e.conversation("idle", i), Image: e.opts.image})
		if err != nil {
			return fmt.Errorf("create sandbox %d of %d: %w", i+1, r.n, err)
		}
		ids[i] = sb.ID
		if k := done.Add(1); k%10 == 0 || int(k) == r.n {
			progress(e.log, "idle: created %d/%d sandboxes (%s)", k, r.n, time.Since(t0).Round(time.Second))
		}
		return nil
	})
	r.createTime = time.Since(t0)
	defer func() {
		// After an interrupt the final sweep removes them faster.
		if ctx.Err() == nil {
			r.deleteTime = deleteAll(ctx, e, sd, ids)
		}
	}()
	if err != nil {
		return r, err
	}
	if r.rssMapped, err = bench.RSS(pid); err != nil {
		return r, err
	}

	done.Store(0)
	t0 = time.Now()
	err = forEach(ctx, r.n, e.opts.idleParallel, func(ctx context.Context, i int) error {
		conv := e.conversation("idle", i)
		run, err := sd.api.CreateRun(ctx, api.CreateRunRequest{Conversation: conv})
		if err != nil {
			return fmt.Errorf("open a run on sandbox %d: %w", i+1, err)
		}
		// A write can only succeed through the sandbox's agent, so it
		// proves the pipe is open.
		if _, err := callTool(ctx, sd.api, run.ID, "write", map[string]string{"path": "idle.txt", "content": conv + "\n"}); err != nil {
			return fmt.Errorf("first tool call on sandbox %d: %w", i+1, err)
		}
		if k := done.Add(1); k%20 == 0 || int(k) == r.n {
			progress(e.log, "idle: opened %d/%d pipes (%s)", k, r.n, time.Since(t0).Round(time.Second))
		}
		return nil
	})
	r.pipesTime = time.Since(t0)
	if err != nil {
		return r, err
	}
	if r.rssPipes, err = bench.RSS(pid); err != nil {
		return r, err
	}
	progress(e.log, "idle: %d sandboxes with open pipes; idle for %s", r.n, e.opts.idleWait)
	if err := sleep(ctx, e.opts.idleWait); err != nil {
		return r, err
	}
	r.anonIdle, _ = bench.AnonRSS(pid)
	if r.rssIdle, err = bench.RSS(pid); err != nil {
		return r, err
	}
	r.dockerdIdle = dockerdRSS()
	r.containerTotal, r.containerMax, r.containerSampled, err = containerMemory(ctx, e)
	return r, err
}

// containerMemory sums `docker stats` memory over every idle sandbox of the
// run; containers whose stats cannot be read are left out of the count.
func containerMemory(ctx context.Context, e *env) (total, most int64, sampled int, err error) {
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"))})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the sandboxes cannot be listed for their memory: %w", err)
	}
	var ids []string
	for _, c := range cs {
		if strings.HasPrefix(c.Labels[sandbox.LabelConversation], e.convPrefix+"idle-") {
			ids = append(ids, c.ID)
		}
	}
	var mu sync.Mutex // guards total, most, sampled
	err = forEach(ctx, len(ids), 8, func(ctx context.Context, i int) error {
		m, err := bench.ContainerMemory(ctx, e.docker, ids[i])
		if err != nil {
			return nil
		}
		mu.Lock()
		total, most, sampled = total+m, max(most, m), sampled+1
		mu.Unlock()
		return nil
	})
	return total, most, sampled, err
}

// deleteAll deletes the sandboxes through the API, as an operator would;
// the final sweep catches any that fail.
func deleteAll(ctx context.Context, e *env, sd *sandboxd, ids []string) time.Duration {
	t0 := time.Now()
	var done atomic.Int64
	_ = forEach(ctx, len(ids), e.opts.idleParallel, func(ctx context.Context, i int) error {
		if ids[i] == "" {
			return nil
		}
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := sd.api.DeleteSandbox(dctx, ids[i]); err != nil {
			progress(e.log, "idle: delete %s: %v (the final sweep removes it)", ids[i], err)
		}
		if k := done.Add(1); k%50 == 0 {
			progress(e.log, "idle: deleted %d/%d sandboxes", k, len(ids))
		}
		return nil
	})
	return time.Since(t0)
}

// dockerdRSS is dockerd's resident memory, or 0 when it cannot be read.
func dockerdRSS() int64 {
	b, err := os.ReadFile(dockerPidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	rss, err := bench.RSS(pid)
	if err != nil {
		return 0
	}
	return rss
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
