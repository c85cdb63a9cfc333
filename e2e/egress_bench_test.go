package e2e

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/internal/egresstest"
)

//go:embed testdata/egress_bench.py
var egressBenchPy string

// TestEgressBenchmark measures network mode "proxy" beside its peer, a
// bridge container reaching the same server straight, in the same run:
// small HTTPS GETs tunnelled and intercepted (a secret added), a 100 MB
// download with sandboxd's CPU per MB, and connections per second. It
// writes the egress section of BENCHMARKS.md.
//
//	SANDBOXD_TEST_DOCKER=1 SANDBOXD_BENCH_EVAL=1 go test ./e2e -run TestEgressBenchmark -v
func TestEgressBenchmark(t *testing.T) {
	if os.Getenv("SANDBOXD_BENCH_EVAL") != "1" || os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 and SANDBOXD_BENCH_EVAL=1 to run the egress benchmark")
	}
	smoke := bench.SmokeFromEnv()
	gets, download, cpsFor, threads := 200, int64(100<<20), 5*time.Second, 8
	if smoke {
		gets, download, cpsFor, threads = 5, 1<<20, time.Second, 2
	}

	ca := egresstest.NewCA(t)
	// The server listens on every address, so that the bridge container
	// reaches it at the host's gateway address; sandboxd at 127.0.0.1.
	blob := egresstest.NewBlob(t, ca, "blob.test", egresstest.ListenOn("0.0.0.0:0"), egresstest.AlsoNamed("secret.test"))
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "token")
	os.WriteFile(secretFile, []byte("bench-token\n"), 0o600)
	cfg, _ := json.Marshal(map[string]any{
		"egress": map[string]any{
			"allow": []string{"blob.test", "secret.test"}, "hosts": map[string]string{"blob.test": "127.0.0.1", "secret.test": "127.0.0.1"},
			"ca_files": []string{ca.PEMFile()}, "max_connections": 1024,
		},
		"secrets": []map[string]any{{"name": "token", "hosts": []string{"secret.test"}, "value_file": secretFile}},
	})
	cfgPath := filepath.Join(dir, "sandboxd.yaml")
	os.WriteFile(cfgPath, cfg, 0o600)
	d := startDaemon(t, "docker", filepath.Join(dir, "data"), "--config", cfgPath)

	if _, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "egress-bench", Image: dockerImage(), Network: "proxy", Secrets: []string{"token"}}); err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "egress-bench"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": ".bench/egress_bench.py", "content": egressBenchPy})
	mustCall(t, d, run.ID, "write", map[string]any{"path": ".bench/ca.pem", "content": string(ca.PEM())})
	if code, out := shellOut(t, d, run.ID, `cat .bench/ca.pem >> "$SSL_CERT_FILE"`, 30); code != 0 {
		t.Fatal(out)
	}
	inSandbox := func(args ...string) string {
		code, out := shellOut(t, d, run.ID, "python3 .bench/egress_bench.py "+strings.Join(args, " "), 600)
		if code != 0 {
			t.Fatalf("the benchmark client in the proxy sandbox: %s", out)
		}
		return out
	}

	// The peer: a bridge container with the same image and client.
	peer := startBridgePeer(t, ca, filepath.Join(dir, "peer"))
	inPeer := func(args ...string) string {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(c, "docker", append([]string{"exec", "-e", "SSL_CERT_FILE=/bench/ca.pem", peer, "python3", "/bench/egress_bench.py"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("the benchmark client in the bridge container: %v\n%s", err, out)
		}
		return string(out)
	}
	port := fmt.Sprint(blob.Port())

	tunnel := parseGets(t, inSandbox("get", "blob.test", port, fmt.Sprint(gets)))
	intercept := parseGets(t, inSandbox("get", "secret.test", port, fmt.Sprint(gets)))
	direct := parseGets(t, inPeer("get", "blob.test", port, fmt.Sprint(gets)))

	cpu0, err := bench.CPUTime(d.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	proxDL := parseDownload(t, inSandbox("download", "blob.test", port, fmt.Sprint(download)))
	cpu1, _ := bench.CPUTime(d.cmd.Process.Pid)
	peerDL := parseDownload(t, inPeer("download", "blob.test", port, fmt.Sprint(download)))
	cpuPerMB := (cpu1 - cpu0) / time.Duration(max(download>>20, 1))

	secs := fmt.Sprint(cpsFor.Seconds())
	proxCPS := parseCPS(t, inSandbox("cps", "blob.test", port, secs, fmt.Sprint(threads)))
	peerCPS := parseCPS(t, inPeer("cps", "blob.test", port, secs, fmt.Sprint(threads)))

	var b strings.Builder
	fmt.Fprintf(&b, "## Egress through sandboxd (network mode `proxy`) beside a `bridge` container\n\n")
	if m, err := bench.DescribeMachine(ctx(t), dockerClient(t)); err == nil {
		fmt.Fprintf(&b, "%s\n\n", m)
	}
	fmt.Fprintf(&b, "| HTTPS GET of a 6-byte object, new connection each | n | p50 | p99 | p50 vs peer |\n| --- | ---: | ---: | ---: | ---: |\n")
	row := func(name string, s bench.Summary) {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %.2fx |\n", name, s.N, bench.Ms(s.P50), bench.Ms(s.P99), bench.Ratio(s.P50, direct.P50))
	}
	row("**sandboxd, tunnelled**: CONNECT to the sandbox's loopback proxy, over the agent pipe to sandboxd, which decides, resolves and splices", tunnel)
	row("**sandboxd, intercepted**: the same, TLS terminated by sandboxd to add a secret header, a new TLS connection upstream", intercept)
	row("**peer**: the same client in a `bridge` container, straight to the server", direct)
	fmt.Fprintf(&b, "\n| %d MiB download | MiB/s | sandboxd CPU per MiB |\n| --- | ---: | ---: |\n", download>>20)
	mb := float64(download) / (1 << 20)
	fmt.Fprintf(&b, "| **sandboxd, tunnelled** | %.1f | %s |\n", mb/proxDL, bench.Ms(cpuPerMB))
	fmt.Fprintf(&b, "| **peer**, `bridge` | %.1f | (no sandboxd in the path) |\n", mb/peerDL)
	fmt.Fprintf(&b, "\n| connections per second (HTTPS GET each, %d threads, %s) | connections/s | vs peer |\n| --- | ---: | ---: |\n", threads, cpsFor)
	fmt.Fprintf(&b, "| **sandboxd, tunnelled** (one sandbox) | %.0f | %.2fx |\n", proxCPS, proxCPS/peerCPS)
	fmt.Fprintf(&b, "| **peer**, `bridge` | %.0f | 1x |\n", peerCPS)
	fmt.Fprintf(&b, "\nHow: `make bench` (BENCH=egress: `go test ./e2e -run TestEgressBenchmark` with SANDBOXD_BENCH_EVAL=1). One server on the host (`internal/egresstest` Blob, HTTPS with a test CA); "+
		"the client is `e2e/testdata/egress_bench.py` (Python's http.client, one warm-up GET), run through the agent in a proxy sandbox and by `docker exec` in a bridge container of the same image; the times are taken inside each container. "+
		"%d GETs per row; the download is %d MiB; sandboxd's CPU is its process's user+system time over the download.\n", gets, download>>20)
	out := os.Getenv("SANDBOXD_BENCH_OUT")
	if out == "" {
		out = "../BENCHMARKS.md"
	}
	if err := bench.Publish(out, "egress", b.String(), smoke, os.Stderr); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}

// startBridgePeer runs a bridge container of the sandbox image with the
// client and the CA, the server's names at the host's gateway address.
func startBridgePeer(t *testing.T, ca *egresstest.CA, dir string) string {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "egress_bench.py"), []byte(egressBenchPy), 0o644)
	os.WriteFile(filepath.Join(dir, "ca.pem"), ca.PEM(), 0o644)
	name := "sandboxd-egress-bench-peer-" + randomHex(t, 4)
	out, err := exec.Command("docker", "run", "-d", "--rm", "--name", name, "--network", "bridge",
		"--add-host", "blob.test:host-gateway", "--add-host", "secret.test:host-gateway",
		"-v", dir+":/bench:ro", "--entrypoint", "sleep", dockerImage(), "3600").CombinedOutput()
	if err != nil {
		t.Fatalf("the bridge peer does not start: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	return name
}

func benchJSON(t *testing.T, out string, v any) {
	t.Helper()
	i := strings.Index(out, "{")
	j := strings.LastIndex(out, "}")
	if i < 0 || j < i {
		t.Fatalf("no JSON in the client's output: %s", out)
	}
	if err := json.Unmarshal([]byte(out[i:j+1]), v); err != nil {
		t.Fatalf("the client's output: %v\n%s", err, out)
	}
}

func parseGets(t *testing.T, out string) bench.Summary {
	var r struct{ MS []float64 }
	benchJSON(t, out, &r)
	ds := make([]time.Duration, len(r.MS))
	for i, ms := range r.MS {
		ds[i] = time.Duration(ms * float64(time.Millisecond))
	}
	return bench.Summarize(ds)
}

func parseDownload(t *testing.T, out string) float64 {
	var r struct {
		Seconds float64
		Bytes   int64
	}
	benchJSON(t, out, &r)
	if r.Seconds <= 0 || r.Bytes == 0 {
		t.Fatalf("a download of nothing: %s", out)
	}
	return r.Seconds
}

func parseCPS(t *testing.T, out string) float64 {
	var r struct {
		Connections int
		Seconds     float64
	}
	benchJSON(t, out, &r)
	if r.Seconds <= 0 || r.Connections == 0 {
		t.Fatalf("no connection made: %s", out)
	}
	return float64(r.Connections) / r.Seconds
}
