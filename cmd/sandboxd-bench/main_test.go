package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--only", "idle, read4k,idle", "--idle", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.only, ",") != "idle,read4k" || o.idle != 7 || o.reads != 2000 || o.execs != 300 || o.creates != 5 {
		t.Errorf("options = %+v", o)
	}
	if !o.runs(benchIdle) || o.runs(benchCreate) {
		t.Errorf("runs: idle %v create %v", o.runs(benchIdle), o.runs(benchCreate))
	}
	s, err := parseFlags([]string{"--smoke", "--idle", "7"}, io.Discard)
	if err != nil || !s.smoke || s.idle != 2 || s.reads > 2 || s.creates != 1 || len(s.only) != 3 {
		t.Errorf("--smoke: options = %+v, %v; want minimal sizes and every benchmark", s, err)
	}
	for _, bad := range [][]string{
		{"--only", "read"},
		{"--only", ""},
		{"--reads", "0"},
		{"--idle-parallel", "0"},
		{"--rounds", "500", "--execs", "300"},
		{"--idle-wait", "-1s"},
		{"--load-clients", "1,0"},
		{"--load-clients", "8,x"},
		{"--load-sandboxes", "0"},
		{"--load-duration", "10ms"},
		{"--load-ext", "go"},
		{"extra"},
	} {
		_, err := parseFlags(bad, io.Discard)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: err = %v, want a usage error", bad, err)
		}
	}
}

func TestParseLoadFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.runs(benchLoad) {
		t.Error("the load benchmark runs without --only naming it")
	}
	o, err = parseFlags([]string{"--only", "load", "--load-clients", "1, 8,64", "--load-duration", "5s", "--load-ext", ".go"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.runs(benchLoad) || fmt.Sprint(o.loadClients) != "[1 8 64]" || o.loadSandboxes != 16 || o.loadDuration != 5*time.Second || o.loadExt != ".go" {
		t.Errorf("options = %+v", o)
	}
}

func TestShareSpreadsEveryCall(t *testing.T) {
	for _, tc := range []struct{ n, rounds int }{{2000, 20}, {300, 20}, {7, 3}, {5, 5}} {
		sum, prev := 0, 1<<30
		for i := range tc.rounds {
			s := share(tc.n, tc.rounds, i)
			if s > prev || prev-s > 1 && i > 0 {
				t.Errorf("n=%d rounds=%d: round %d gets %d after %d", tc.n, tc.rounds, i, s, prev)
			}
			sum, prev = sum+s, s
		}
		if sum != tc.n {
			t.Errorf("n=%d rounds=%d: %d calls in all", tc.n, tc.rounds, sum)
		}
	}
}

func TestForEachBoundsAndStopsOnError(t *testing.T) {
	var running, peak, calls atomic.Int64
	err := forEach(context.Background(), 40, 3, func(ctx context.Context, i int) error {
		calls.Add(1)
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		return nil
	})
	if err != nil || calls.Load() != 40 || peak.Load() > 3 {
		t.Errorf("err %v, calls %d, peak %d (want 40 calls, at most 3 at a time)", err, calls.Load(), peak.Load())
	}

	boom := errors.New("boom")
	calls.Store(0)
	err = forEach(context.Background(), 1000, 2, func(ctx context.Context, i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() > 20 {
		t.Errorf("err %v after %d calls; want boom and an early stop", err, calls.Load())
	}
}

func TestRead4KChecksAreComputed(t *testing.T) {
	fast := bench.Summary{N: 10, P50: 500 * time.Microsecond}
	slow := bench.Summary{N: 10, P50: 30 * time.Millisecond}
	c := read4KChecks(fast, slow)
	if !c[0].Met || !c[1].Met {
		t.Errorf("30 ms vs 0.5 ms: %+v", c)
	}
	c = read4KChecks(bench.Summary{N: 10, P50: 2500 * time.Microsecond}, slow)
	if c[0].Met || c[1].Met {
		t.Errorf("30 ms vs 2.5 ms should miss both: %+v", c)
	}
}

func TestRenderRead4KAndWriteSection(t *testing.T) {
	e := &env{opts: options{image: "img:1"}, machine: bench.Machine{Cores: 2, Kernel: "6.1", Docker: "28.0"}}
	sd := &sandboxd{Daemon: &bench.Daemon{Version: "dev"}}
	r := read4KResult{
		http:   []time.Duration{time.Millisecond, 2 * time.Millisecond, 900 * time.Microsecond},
		exec:   []time.Duration{40 * time.Millisecond, 45 * time.Millisecond},
		rounds: 2, elapsed: 3 * time.Second,
	}
	section := renderRead4K(e, sd, r)
	for _, want := range []string{"img:1", "| **sandboxd**", "1.000 ms", "40.0 ms", "**40.0x**", "**met**"} {
		if !strings.Contains(section, want) {
			t.Errorf("section lacks %q:\n%s", want, section)
		}
	}
	if strings.Contains(section, "raw agent pipe") {
		t.Error("the raw pipe row appears with no samples")
	}

	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := writeSection(out, benchRead4K, section); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(out, benchCreate, "create figures"); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(out, benchRead4K, "read figures v2"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	doc := string(b)
	if !strings.HasPrefix(doc, "# Benchmarks") || !strings.Contains(doc, "read figures v2") ||
		strings.Contains(doc, "img:1") || !strings.Contains(doc, "create figures") ||
		strings.Index(doc, "read figures v2") > strings.Index(doc, "create figures") {
		t.Errorf("report:\n%s", doc)
	}
}

func TestBaselineTable(t *testing.T) {
	doc := "# Benchmarks\n\n<!-- bench:load:start -->\n## Throughput\n\n_Measured then._\n\n| clients | calls/s |\n| ---: | ---: |\n| 1 | 200 |\n\n| target | got |\n| --- | --- |\n<!-- bench:load:end -->\n"
	meta, table, err := baselineTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	if meta != "_Measured then._" || table != "| clients | calls/s |\n| ---: | ---: |\n| 1 | 200 |\n" {
		t.Errorf("meta %q, table %q", meta, table)
	}
	if _, _, err := baselineTable("# no section\n"); err == nil {
		t.Error("a report without a load section gave no error")
	}
}
