package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
)

// TestAuditBenchmark measures what the audit record costs a tool call:
// read and write (4 KiB) p50 and p99 through the Docker daemon with the
// record on and off, one call at a time, and writes its section of
// BENCHMARKS.md (SANDBOXD_BENCH_OUT names the file; SANDBOXD_BENCH_SMOKE=1
// makes a few calls and only checks the section renders):
//
//	SANDBOXD_TEST_DOCKER=1 SANDBOXD_BENCH_EVAL=1 go test ./e2e -run TestAuditBenchmark -v
func TestAuditBenchmark(t *testing.T) {
	if os.Getenv("SANDBOXD_BENCH_EVAL") != "1" || os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 and SANDBOXD_BENCH_EVAL=1 to run the audit benchmark")
	}
	smoke := bench.SmokeFromEnv()
	warm, n := 30, 400
	if smoke {
		warm, n = 2, 5
	}
	content := strings.Repeat("x", 4095) + "\n"
	type figures struct{ readP50, readP99, writeP50, writeP99 time.Duration }
	measure := func(mode string, disabled bool) figures {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "sandboxd.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("audit: {disabled: %v}\n", disabled)), 0o600); err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, "docker", filepath.Join(dir, "data"), "--config", cfg)
		conv := "conv-auditbench-" + mode
		sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", conv))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Client.DeleteSandbox(ctx(t), sb.ID)
		run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		mustCall(t, d, run.ID, "write", map[string]any{"path": "r.txt", "content": content})
		timed := func(tool string, args func(i int) map[string]any) (p50, p99 time.Duration) {
			var ds []time.Duration
			for i := range warm + n {
				start := time.Now()
				mustCall(t, d, run.ID, tool, args(i))
				if i >= warm {
					ds = append(ds, time.Since(start))
				}
			}
			slices.Sort(ds)
			return ds[len(ds)/2], ds[len(ds)*99/100]
		}
		var f figures
		f.readP50, f.readP99 = timed("read", func(int) map[string]any { return map[string]any{"path": "r.txt"} })
		f.writeP50, f.writeP99 = timed("write", func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("w/%d.txt", i%50), "content": content}
		})
		return f
	}
	// Alternating rounds, so that a change of the machine's load falls on
	// both sides.
	var offs, ons []figures
	rounds := 3
	if smoke {
		rounds = 1
	}
	for range rounds {
		offs = append(offs, measure("off", true))
		ons = append(ons, measure("on", false))
	}
	med := func(fs []figures, get func(figures) time.Duration) time.Duration {
		ds := make([]time.Duration, len(fs))
		for i, f := range fs {
			ds[i] = get(f)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	row := func(name string, get func(figures) time.Duration) string {
		off, on := med(offs, get), med(ons, get)
		return fmt.Sprintf("| %s | %s | %s | %+.2f ms |\n", name, bench.Ms(off), bench.Ms(on), float64((on-off).Microseconds())/1000)
	}
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := bench.DescribeMachine(c, dockerClient(t))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## The audit record: what it costs a call\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; load average at the end %s; image `%s`._\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), m, bench.LoadAverage(), dockerImage())
	fmt.Fprintf(&b, "| figure (4 KiB, one call at a time, over HTTP into a Docker sandbox) | audit off | audit on | on − off |\n| --- | ---: | ---: | ---: |\n")
	b.WriteString(row("`read` p50", func(f figures) time.Duration { return f.readP50 }))
	b.WriteString(row("`read` p99", func(f figures) time.Duration { return f.readP99 }))
	b.WriteString(row("`write` p50 (its record fsynced before the answer)", func(f figures) time.Duration { return f.writeP50 }))
	b.WriteString(row("`write` p99", func(f figures) time.Duration { return f.writeP99 }))
	fmt.Fprintf(&b, "\nHow: `make bench` (BENCH=audit: `go test ./e2e -run TestAuditBenchmark`); %d rounds, each a daemon with `audit: {disabled: true}` then one with the record on, %d warm-up then %d calls of each tool per daemon; each figure is the median of the rounds'. A write's record is on disk (fsync, shared with every record waiting) before its answer; a read's within 200 ms. The peer is sandboxd itself with the record off.\n", rounds, warm, n)
	out := os.Getenv("SANDBOXD_BENCH_OUT")
	if out == "" {
		out = "../BENCHMARKS.md"
	}
	if err := bench.Publish(out, "audit", b.String(), smoke, os.Stderr); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}
