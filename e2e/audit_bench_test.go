package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// TestAuditBenchmark measures what the audit record costs a tool call:
// read and write (4 KiB) p50 and p99 through the Docker daemon with the
// record on and off, one call at a time. It runs only when asked and
// prints the figures (it writes no file):
//
//	SANDBOXD_TEST_DOCKER=1 SANDBOXD_BENCH_AUDIT=1 go test ./e2e -run TestAuditBenchmark -v
func TestAuditBenchmark(t *testing.T) {
	if os.Getenv("SANDBOXD_BENCH_AUDIT") != "1" || os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 and SANDBOXD_BENCH_AUDIT=1 to run the audit benchmark")
	}
	const warm, n = 30, 400
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
	off := measure("off", true)
	on := measure("on", false)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	t.Logf("audit record cost, %d sequential calls each, 4 KiB (Docker):", n)
	t.Logf("  read  p50: off %s, on %s; p99: off %s, on %s", ms(off.readP50), ms(on.readP50), ms(off.readP99), ms(on.readP99))
	t.Logf("  write p50: off %s, on %s; p99: off %s, on %s", ms(off.writeP50), ms(on.writeP50), ms(off.writeP99), ms(on.writeP99))
}
