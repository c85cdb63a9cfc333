package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// costFigures are the agent's CPU and memory with and without the watch.
type costFigures struct {
	files, changed, dirs int
	setup                time.Duration // from Subscribe to the watch responding to a flush
	idle                 time.Duration // the idle window
	idleCPUNo, idleCPU   time.Duration // agent CPU time in the idle window
	rssNo, rss, rssAfter int64         // bytes
	coWallNo, coWall     time.Duration // git checkout's own time
	coCPUNo, coCPU       time.Duration // agent CPU from the checkout's start to 3 s after its end
	events, resyncs      uint64
	lastEvent            time.Duration // from the checkout's end to the last batch handled (negative: before it)
}

// sample reads the agent daemon's CPU time and resident memory.
func sample(ctx context.Context, ag *agent.Client, pid int) (time.Duration, int64, error) {
	out, err := sh(ctx, ag, "/", fmt.Sprintf("cat /proc/%d/stat; grep VmRSS /proc/%d/status", pid, pid), 10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	lines := strings.SplitN(out, "\n", 2)
	stat := lines[0]
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || len(lines) < 2 {
		return 0, 0, fmt.Errorf("unexpected /proc output: %q", out)
	}
	fields := strings.Fields(stat[i+1:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	rf := strings.Fields(lines[1])
	kb, _ := strconv.ParseInt(rf[1], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, kb << 10, nil // CLK_TCK 100
}

func measureCost(ctx context.Context, st *stack, files, changed int, idle time.Duration) (costFigures, error) {
	f := costFigures{files: files, changed: changed, idle: idle}
	ag, info, err := st.sandbox(ctx, "tree", "")
	if err != nil {
		return f, err
	}
	defer st.mgr.Delete(context.WithoutCancel(ctx), st.tenant, info.ID)
	// 50 top directories of 50 subdirectories of 20 files; the checkout
	// changes the first `changed` files.
	gen := fmt.Sprintf(`set -e
mkdir -p tree && cd tree
python3 - <<'PY'
import os
for i in range(%d):
    d = "d%%02d/s%%02d" %% (i // 1000, (i // 20) %% 50)
    os.makedirs(d, exist_ok=True)
    with open("%%s/f%%05d.go" %% (d, i), "w") as f:
        f.write("package p\n\n// file %%d\nfunc F%%d() int { return %%d }\n" %% (i, i, i))
PY
git init -q -b main
git add -A
git -c user.email=b@b -c user.name=b commit -qm base
git checkout -qb other
python3 - <<'PY'
import os
for i in range(%d):
    p = "d%%02d/s%%02d/f%%05d.go" %% (i // 1000, (i // 20) %% 50, i)
    with open(p, "a") as f:
        f.write("// changed on other\n")
PY
git -c user.email=b@b -c user.name=b commit -qam other
git checkout -q main
`, files, changed)
	if _, err := sh(ctx, ag, info.Workspace, gen, 15*time.Minute); err != nil {
		return f, err
	}
	hello, err := ag.Hello(ctx)
	if err != nil {
		return f, err
	}
	pid := hello.PID
	checkout := func(branch string) (wall, cpu time.Duration, end time.Time, err error) {
		c0, _, err := sample(ctx, ag, pid)
		if err != nil {
			return 0, 0, end, err
		}
		t0 := time.Now()
		if _, err := sh(ctx, ag, info.Workspace+"/tree", "git checkout -q "+branch, 5*time.Minute); err != nil {
			return 0, 0, end, err
		}
		end = time.Now()
		wall = end.Sub(t0)
		time.Sleep(3 * time.Second)
		c1, _, err := sample(ctx, ag, pid)
		return wall, c1 - c0, end, err
	}
	idleCPU := func() (time.Duration, int64, error) {
		c0, _, err := sample(ctx, ag, pid)
		if err != nil {
			return 0, 0, err
		}
		time.Sleep(idle)
		c1, rss, err := sample(ctx, ag, pid)
		return c1 - c0, rss, err
	}

	// A checkout there and back, untimed, so that both measured ones find
	// the tree in the page cache.
	if _, _, _, err = checkout("other"); err != nil {
		return f, err
	}
	if _, _, _, err = checkout("main"); err != nil {
		return f, err
	}

	// Not watching.
	time.Sleep(2 * time.Second)
	if f.idleCPUNo, f.rssNo, err = idleCPU(); err != nil {
		return f, err
	}
	if f.coWallNo, f.coCPUNo, _, err = checkout("other"); err != nil {
		return f, err
	}
	if _, _, _, err = checkout("main"); err != nil {
		return f, err
	}

	// Watching.
	var mu sync.Mutex
	var last time.Time
	t0 := time.Now()
	sub := ag.Subscribe(info.Workspace, "watchbench", func(proto.WatchEvent) {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
	})
	defer sub.Close()
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := sub.Sync(sctx)
		cancel()
		if err == nil {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return f, fmt.Errorf("the watch did not come up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.setup = time.Since(t0)
	f.dirs = sub.Status().Dirs
	time.Sleep(2 * time.Second)
	if f.idleCPU, f.rss, err = idleCPU(); err != nil {
		return f, err
	}
	before := sub.Status()
	var end time.Time
	if f.coWall, f.coCPU, end, err = checkout("other"); err != nil {
		return f, err
	}
	if err := sub.Sync(ctx); err != nil {
		return f, err
	}
	after := sub.Status()
	f.events, f.resyncs = after.Events-before.Events, after.Resyncs-before.Resyncs
	mu.Lock()
	f.lastEvent = last.Sub(end)
	mu.Unlock()
	if _, f.rssAfter, err = sample(ctx, ag, pid); err != nil {
		return f, err
	}
	return f, nil
}
