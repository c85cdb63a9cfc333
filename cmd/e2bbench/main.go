// Command e2bbench measures sandboxd through E2B's own SDK next to the
// same calls through sandboxd's own API, in one run against one daemon on
// Docker, and rewrites the e2b section of BENCHMARKS.md:
//
//   - time to interactive: Sandbox.create until the first commands.run
//     answered (own API: POST /v1/sandboxes, a run, the first shell call);
//   - commands.run("true") (own API: the shell tool);
//   - files.read of 4 KiB (own API: the read tool);
//   - runCode("1+1") of @e2b/code-interpreter (own API: the eval tool).
//
// The SDK's side is e2e/e2b/bench.mjs, run by Node with the SDK pinned by
// e2e/e2b/package-lock.json (npm ci when node_modules is not from it).
//
//	make build && go run ./cmd/e2bbench [-out BENCHMARKS.md] [--smoke]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
)

type flags struct {
	sandboxd, agent, image string
	out                    string
	rounds, calls          int
	smoke                  bool
}

func main() {
	var f flags
	flag.StringVar(&f.sandboxd, "sandboxd", "bin/sandboxd", "sandboxd binary (make build)")
	flag.StringVar(&f.agent, "agent", "bin/sandbox-agent", "sandbox-agent binary (make build)")
	flag.StringVar(&f.image, "image", bench.EnvOr("SANDBOXD_TEST_IMAGE", "sandboxd-sandbox:latest"), "sandbox image")
	flag.StringVar(&f.out, "out", "BENCHMARKS.md", "file whose e2b section is rewritten; empty prints it")
	flag.IntVar(&f.rounds, "rounds", 10, "creates timed each way")
	flag.IntVar(&f.calls, "calls", 200, "calls of each kind timed each way")
	flag.BoolVar(&f.smoke, "smoke", false, "one create and three calls each way; check the section renders without rewriting -out")
	flag.Parse()
	if f.smoke {
		f.rounds, f.calls = 1, 3
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "e2bbench:", err)
		os.Exit(1)
	}
}

// samples are one side's latencies, by figure.
type samples struct {
	TTI     []float64 `json:"tti"`
	RunTrue []float64 `json:"run_true"`
	Read4K  []float64 `json:"read_4k"`
	RunCode []float64 `json:"run_code"`
}

func run(f flags) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sdkDir, err := filepath.Abs(filepath.Join("e2e", "e2b"))
	if err != nil {
		return err
	}
	if err := bench.InstallNodeModules(ctx, sdkDir); err != nil {
		return err
	}
	bin, err := filepath.Abs(f.sandboxd)
	if err != nil {
		return err
	}
	agent, err := filepath.Abs(f.agent)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf("default_image: %q\ne2b:\n  templates: {base: %q, code-interpreter-v1: %q}\n", f.image, f.image, f.image)
	d, err := bench.StartDaemon(ctx, bench.DaemonOptions{Binary: bin, Agent: agent, Config: cfg, DataDirPrefix: "sandboxd-e2bbench-", BinaryHint: "build it with `make build` or name it with -sandboxd"})
	if err != nil {
		return err
	}
	defer d.Stop()
	cli, err := client.New(d.URL, d.Token)
	if err != nil {
		return err
	}
	defer cleanup(cli)

	// Interleaved: the SDK's side, then the own API's, so that neither
	// has the machine to itself.
	sdk, err := runSDK(ctx, sdkDir, d, f)
	if err != nil {
		return err
	}
	own, err := runOwn(ctx, cli, f)
	if err != nil {
		return err
	}
	machine, err := bench.DescribeLocalMachine(ctx)
	if err != nil {
		return err
	}
	body := render(f, machine, sdk, own)
	if f.out == "" {
		fmt.Print(body)
		return nil
	}
	return bench.Publish(f.out, "e2b", body, f.smoke, os.Stderr)
}

// runSDK runs bench.mjs against d and reads its samples.
func runSDK(ctx context.Context, dir string, d *bench.Daemon, f flags) (samples, error) {
	cmd := exec.CommandContext(ctx, "node", "bench.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+d.URL+"/e2b", "E2B_SANDBOX_URL="+d.URL+"/e2b/sandbox", "E2B_API_KEY="+d.Token,
		fmt.Sprintf("E2B_BENCH_ROUNDS=%d", f.rounds), fmt.Sprintf("E2B_BENCH_CALLS=%d", f.calls))
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return samples{}, fmt.Errorf("node bench.mjs: %v\n%s\nsandboxd: %s", err, errb.String(), d.Stderr())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s samples
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		return samples{}, fmt.Errorf("bench.mjs printed %q, not its samples: %v", out.String(), err)
	}
	return s, nil
}

// runOwn makes the same calls through sandboxd's own API with its Go
// client.
func runOwn(ctx context.Context, cli *client.Client, f flags) (samples, error) {
	var s samples
	call := func(runID, tool string, args map[string]any) (string, error) {
		raw, _ := json.Marshal(args)
		res, err := cli.CallTool(ctx, runID, tool, raw)
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", fmt.Errorf("%s answered an error: %s", tool, res.Text())
		}
		return res.Text(), nil
	}
	for i := range f.rounds {
		conv := fmt.Sprintf("own-tti-%d-%d", time.Now().UnixNano(), i)
		t0 := time.Now()
		sb, err := cli.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: conv})
		if err != nil {
			return s, err
		}
		r, err := cli.CreateRun(ctx, api.CreateRunRequest{Conversation: conv})
		if err != nil {
			return s, err
		}
		if _, err := call(r.ID, "shell", map[string]any{"command": "true"}); err != nil {
			return s, err
		}
		s.TTI = append(s.TTI, ms(time.Since(t0)))
		_ = cli.DeleteRun(ctx, r.ID)
		if err := cli.DeleteSandbox(ctx, sb.ID); err != nil {
			return s, err
		}
	}
	conv := fmt.Sprintf("own-calls-%d", time.Now().UnixNano())
	sb, err := cli.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: conv})
	if err != nil {
		return s, err
	}
	defer cli.DeleteSandbox(context.WithoutCancel(ctx), sb.ID)
	r, err := cli.CreateRun(ctx, api.CreateRunRequest{Conversation: conv})
	if err != nil {
		return s, err
	}
	defer cli.DeleteRun(context.WithoutCancel(ctx), r.ID)
	if _, err := call(r.ID, "write", map[string]any{"path": "bench-4k.txt", "content": strings.Repeat("x", 4095) + "\n"}); err != nil {
		return s, err
	}
	evalArgs := map[string]any{"code": "1+1", "language": "python", "description": "1+1"}
	kinds := []struct {
		into *[]float64
		tool string
		args map[string]any
	}{
		{&s.RunTrue, "shell", map[string]any{"command": "true"}},
		{&s.Read4K, "read", map[string]any{"path": "bench-4k.txt"}},
		{&s.RunCode, "eval", evalArgs},
	}
	for _, k := range kinds {
		if _, err := call(r.ID, k.tool, k.args); err != nil { // warm, untimed
			return s, err
		}
		for range f.calls {
			t0 := time.Now()
			if _, err := call(r.ID, k.tool, k.args); err != nil {
				return s, err
			}
			*k.into = append(*k.into, ms(time.Since(t0)))
		}
	}
	return s, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cleanup deletes whatever the run left in the daemon.
func cleanup(cli *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, err := cli.ListSandboxes(ctx, "")
	if err != nil {
		return
	}
	for _, sb := range list {
		_ = cli.DeleteSandbox(ctx, sb.ID)
	}
}

// durations turns milliseconds into durations.
func durations(v []float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * float64(time.Millisecond))
	}
	return out
}

func render(f flags, machine string, sdk, own samples) string {
	var b strings.Builder
	b.WriteString("## E2B's SDK against sandboxd, next to sandboxd's own API\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; load average at the end %s; image `%s`; SDK `e2b` 2.51.0 and `@e2b/code-interpreter` 2.8.0 (e2e/e2b/package-lock.json), Node %s._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine, bench.LoadAverage(), f.image, nodeVersion())
	b.WriteString("| figure | through | n | p50 | p99 | E2B SDK ÷ own API (p50) |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	rows := []struct {
		what, sdkCall, ownCall string
		sdk, own               []float64
	}{
		{"time to interactive: create until the first command answered", "`Sandbox.create()` + `commands.run('true')`", "`POST /v1/sandboxes` + `POST /v1/runs` + `shell` `true`", sdk.TTI, own.TTI},
		{"a command", "`commands.run('true')`", "`shell` `true`", sdk.RunTrue, own.RunTrue},
		{"read a 4 KiB file", "`files.read()`", "`read`", sdk.Read4K, own.Read4K},
		{"run `1+1` in the Python kernel", "`runCode('1+1')`", "`eval`", sdk.RunCode, own.RunCode},
	}
	for _, r := range rows {
		s, o := bench.Summarize(durations(r.sdk)), bench.Summarize(durations(r.own))
		fmt.Fprintf(&b, "| %s | E2B SDK: %s | %d | %s | %s | %.2fx |\n", r.what, r.sdkCall, s.N, bench.Ms(s.P50), bench.Ms(s.P99), bench.Ratio(s.P50, o.P50))
		fmt.Fprintf(&b, "| %s | sandboxd's API: %s | %d | %s | %s | |\n", r.what, r.ownCall, o.N, bench.Ms(o.P50), bench.Ms(o.P99))
	}
	tti := bench.Summarize(durations(sdk.TTI))
	fmt.Fprintf(&b, "\n| time to interactive | p50 | source |\n| --- | ---: | --- |\n| sandboxd on Docker through E2B's SDK | %s | measured here |\n| hosted sandbox services (a third-party board's medians) | 0.11 s to 2.7 s | published, not measured here |\n\n", bench.Ms(tti.P50))
	b.WriteString("How: `make build && go run ./cmd/e2bbench` (`BENCH=e2b scripts/bench.sh`): one `bin/sandboxd serve` on Docker with `e2b.templates` naming the image for `base` and `code-interpreter-v1`; " +
		"the SDK's side is `e2e/e2b/bench.mjs` in Node with `E2B_API_URL`, `E2B_SANDBOX_URL` and `E2B_API_KEY` pointing at it (no E2B service involved), the own API's side the Go client (`api/client`) on the same daemon, one after the other. " +
		"Time to interactive is timed from the create call until the first command's answer, each sandbox killed untimed after; the calls run one at a time on one sandbox each way, after one untimed call of each kind (the first `runCode` or `eval` starts the kernel). " +
		"The SDK's figures include what E2B's protocol adds: Connect RPC streams for a command (start, data and end events), an HTTP download for a file, a JSON-lines stream for `runCode`; sandboxd's own API answers each with one JSON response. The peers' figure is their own publication, on their infrastructure.\n")
	return b.String()
}

// nodeVersion is `node --version`, or "unknown".
func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
