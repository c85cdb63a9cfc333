package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
)

// The tools the load mixes, in the order they are reported.
var loadTools = []string{"read", "write", "edit"}

// loadMix is one client's repeating sequence of calls: half reads, a
// quarter each writes and edits, as an agent reads more than it changes.
var loadMix = []string{"read", "write", "read", "edit"}

// loadLevel is one level of concurrency: every timed call of each tool.
type loadLevel struct {
	clients   int
	sandboxes int // sandboxes the clients were spread over
	elapsed   time.Duration
	calls     map[string][]time.Duration
	cpu       time.Duration // sandboxd's user + system CPU over the window
}

func (l loadLevel) total() int {
	n := 0
	for _, d := range l.calls {
		n += len(d)
	}
	return n
}

type loadResult struct {
	levels    []loadLevel
	sandboxes int
	loadStart string // the machine's load average before the first level

	// An earlier run's figures (--load-baseline), shown as "before".
	baselineLabel, baselineMeta, baselineTable string
}

// runLoad creates the sandboxes, then runs each level of clients against
// them for the duration: client i is a run of sandbox i mod sandboxes's
// conversation, so at 64 clients over 16 sandboxes four runs share each
// conversation (and queue behind each other's writes, as the contract
// says), while different conversations must not wait for each other.
func runLoad(ctx context.Context, e *env, sd *sandboxd) (loadResult, error) {
	o := e.opts
	r := loadResult{sandboxes: o.loadSandboxes, loadStart: bench.LoadAverage(), baselineLabel: o.loadBaselineLabel}
	if o.loadBaseline != "" {
		doc, err := os.ReadFile(o.loadBaseline)
		if err != nil {
			return r, fmt.Errorf("--load-baseline: %w", err)
		}
		if r.baselineMeta, r.baselineTable, err = baselineTable(string(doc)); err != nil {
			return r, usagef("--load-baseline %s: %v", o.loadBaseline, err)
		}
	}
	maxClients := 0
	for _, c := range o.loadClients {
		maxClients = max(maxClients, c)
	}
	// One keep-alive connection per client, as many platforms' clients do;
	// the default of two idle connections would time connection set-up.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxClients + 4
	defer tr.CloseIdleConnections()
	api2, err := client.New(sd.URL, sd.Token, client.WithHTTPClient(&http.Client{Transport: tr, Timeout: 5 * time.Minute}))
	if err != nil {
		return r, err
	}
	n := min(o.loadSandboxes, maxClients)
	convs := make([]string, n)
	ids := make([]string, n)
	t0 := time.Now()
	err = forEach(ctx, n, o.idleParallel, func(ctx context.Context, i int) error {
		convs[i] = e.conversation("load", i)
		sb, err := api2.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: convs[i], Image: o.image})
		if err != nil {
			return fmt.Errorf("create sandbox %d: %w", i, err)
		}
		ids[i] = sb.ID
		return nil
	})
	defer func() {
		for _, id := range ids {
			if id != "" {
				_ = api2.DeleteSandbox(context.WithoutCancel(ctx), id)
			}
		}
	}()
	if err != nil {
		return r, err
	}
	progress(e.log, "load: %d sandboxes created in %s", n, time.Since(t0).Round(time.Millisecond))
	for li, clients := range o.loadClients {
		lv, err := runLoadLevel(ctx, e, sd, api2, convs, li, clients)
		if err != nil {
			return r, err
		}
		r.levels = append(r.levels, lv)
		progress(e.log, "load: %d clients: %.0f calls/s; %s", clients, float64(lv.total())/lv.elapsed.Seconds(), levelLine(lv))
	}
	return r, nil
}

func levelLine(lv loadLevel) string {
	var parts []string
	for _, t := range loadTools {
		s := bench.Summarize(lv.calls[t])
		parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s", t, bench.Ms(s.P50), bench.Ms(s.P99)))
	}
	return strings.Join(parts, ", ")
}

// loadClient is one run and the file only it changes, so that every edit
// knows the text it replaces and every read what it must find.
type loadClient struct {
	run   string
	path  string
	token int // the file's current "token: v<N>" line
}

func (c *loadClient) content() string {
	// About 2 KiB: a small write, as an agent's edits are.
	var b strings.Builder
	fmt.Fprintf(&b, "token: v%d\n", c.token)
	for i := 1; b.Len() < 2048; i++ {
		fmt.Fprintf(&b, "line %03d of %s, written by the load benchmark\n", i, c.path)
	}
	return b.String()
}

func (c *loadClient) call(ctx context.Context, cl *client.Client, tool string) error {
	switch tool {
	case "read":
		text, err := callTool(ctx, cl, c.run, "read", map[string]string{"path": c.path})
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("token: v%d\n", c.token); !strings.Contains(text, want) {
			return fmt.Errorf("read of %s does not hold %q, which the last change wrote", c.path, want)
		}
	case "write":
		c.token++
		_, err := callTool(ctx, cl, c.run, "write", map[string]string{"path": c.path, "content": c.content()})
		return err
	case "edit":
		old, repl := fmt.Sprintf("token: v%d\n", c.token), fmt.Sprintf("token: v%d\n", c.token+1)
		c.token++
		_, err := callTool(ctx, cl, c.run, "edit", map[string]string{"path": c.path, "old": old, "new": repl})
		return err
	}
	return nil
}

// runLoadLevel opens the level's runs, writes each client's file
// (untimed), then lets every client call in a loop until the duration is
// over, timing each call.
func runLoadLevel(ctx context.Context, e *env, sd *sandboxd, cl *client.Client, convs []string, level, clients int) (loadLevel, error) {
	lv := loadLevel{clients: clients, sandboxes: min(clients, len(convs)), calls: map[string][]time.Duration{}}
	cs := make([]*loadClient, clients)
	err := forEach(ctx, clients, 8, func(ctx context.Context, i int) error {
		run, err := cl.CreateRun(ctx, api.CreateRunRequest{Conversation: convs[i%len(convs)]})
		if err != nil {
			return fmt.Errorf("open run %d: %w", i, err)
		}
		c := &loadClient{run: run.ID, path: fmt.Sprintf("load/l%d-c%d%s", level, i, e.opts.loadExt)}
		cs[i] = c
		for _, tool := range []string{"write", "read", "edit", "read"} {
			if err := c.call(ctx, cl, tool); err != nil {
				return fmt.Errorf("client %d, untimed %s: %w", i, tool, err)
			}
		}
		return nil
	})
	defer func() {
		for _, c := range cs {
			if c != nil {
				_ = cl.DeleteRun(context.WithoutCancel(ctx), c.run)
			}
		}
	}()
	if err != nil {
		return lv, err
	}

	var (
		mu    sync.Mutex // guards lv.calls and first
		first error
		wg    sync.WaitGroup
	)
	cpu0, err := bench.CPUTime(sd.Pid())
	if err != nil {
		return lv, err
	}
	start := time.Now()
	end := start.Add(e.opts.loadDuration)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples := map[string][]time.Duration{}
			defer func() {
				mu.Lock()
				for t, d := range samples {
					lv.calls[t] = append(lv.calls[t], d...)
				}
				mu.Unlock()
			}()
			// Clients start at different points of the mix, so the tools
			// are not called in lockstep.
			for k := i; time.Now().Before(end) && lctx.Err() == nil; k++ {
				tool := loadMix[k%len(loadMix)]
				t := time.Now()
				if err := c.call(lctx, cl, tool); err != nil {
					mu.Lock()
					if first == nil && lctx.Err() == nil {
						first = fmt.Errorf("client %d: %w", i, err)
					}
					mu.Unlock()
					cancel()
					return
				}
				samples[tool] = append(samples[tool], time.Since(t))
			}
		}()
	}
	wg.Wait()
	lv.elapsed = time.Since(start)
	cpu1, cerr := bench.CPUTime(sd.Pid())
	if first != nil {
		return lv, first
	}
	if ctx.Err() != nil {
		return lv, ctx.Err()
	}
	if cerr != nil {
		return lv, cerr
	}
	lv.cpu = cpu1 - cpu0
	return lv, nil
}
