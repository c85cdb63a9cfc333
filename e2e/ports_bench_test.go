package e2e

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/gorilla/websocket"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
)

//go:embed testdata/portsrv.py
var portsrvPy string

// benchAppPort is where the test app listens, in the sandbox and in the
// published peer container alike, as Python's http.server does by default;
// benchNodelayPort has the same app with Nagle's algorithm off, which
// tells the cost of the path from a stall between the app's two writes
// (the headers, then the body) and a delayed acknowledgement.
const (
	benchAppPort     = 3000
	benchNodelayPort = 3001
)

// previewSizes is how much the preview benchmark measures.
type previewSizes struct {
	gets      int   // 4 KiB page GETs per HTTP path
	execs     int   // of them, fresh `docker exec` curls (each path)
	echoes    int   // WebSocket round trips per path
	download  int64 // bytes per download
	downloads int   // downloads per path
	lines     int   // process output lines timed per path
}

// TestPreviewBenchmark measures a sandbox's app reached through sandboxd
// (a preview link, the port proxy, a process's output stream) beside its
// peers in the same run: a fresh `docker exec` per request, the way a
// platform reaches an app in a container without sandboxd, and a port
// published by Docker, the direct path and so the limit. It writes the
// previews section of BENCHMARKS.md.
//
//	SANDBOXD_TEST_DOCKER=1 SANDBOXD_BENCH_EVAL=1 go test ./e2e -run TestPreviewBenchmark -v
func TestPreviewBenchmark(t *testing.T) {
	if os.Getenv("SANDBOXD_BENCH_EVAL") != "1" || os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 and SANDBOXD_BENCH_EVAL=1 to run the preview benchmark")
	}
	smoke := bench.SmokeFromEnv()
	n := previewSizes{gets: 300, execs: 100, echoes: 1000, download: 256 << 20, downloads: 3, lines: 100}
	if smoke {
		n = previewSizes{gets: 5, execs: 3, echoes: 10, download: 1 << 20, downloads: 1, lines: 5}
	}
	dir := t.TempDir()
	d := startDaemon(t, "docker", filepath.Join(dir, "data"))

	// The app in a sandbox of the default network mode ("none"), started
	// as a long-lived process through the API.
	conv := "preview-bench-" + randomHex(t, 4)
	sb, err := d.Client.CreateSandbox(ctx(t), createReq("docker", conv))
	if err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": ".bench/portsrv.py", "content": portsrvPy})
	for _, args := range []string{fmt.Sprint(benchAppPort, " sandbox"), fmt.Sprint(benchNodelayPort, " sandbox nodelay")} {
		var app api.Process
		procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes", api.StartProcess{Command: "exec python3 .bench/portsrv.py " + args}, &app, http.StatusCreated)
	}
	waitFor(t, 30*time.Second, "the apps listen in the sandbox", func() error {
		seen := 0
		for _, l := range listPorts(t, d, sb.ID) {
			if l.Port == benchAppPort || l.Port == benchNodelayPort {
				seen++
			}
		}
		if seen < 2 {
			return errNotYet
		}
		return nil
	})
	preview := createPreview(t, d, sb.ID, map[string]any{"port": benchAppPort})
	nodelay := createPreview(t, d, sb.ID, map[string]any{"port": benchNodelayPort})
	box := sandboxContainer(t, conv)
	published, pubNodelay := startPublishedPeer(t, filepath.Join(dir, "peer"))

	pages := measurePages(t, d, n, box, map[string]string{
		"preview": preview.URL, "preview-nodelay": nodelay.URL,
		"proxy":     fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d/", d.URL, sb.ID, benchAppPort),
		"published": published, "published-nodelay": pubNodelay,
	})
	wsPreview, wsPublished := measureEchoes(t, n.echoes, "ws"+strings.TrimPrefix(preview.URL, "http")+"ws", "ws"+strings.TrimPrefix(published, "http")+"ws")

	var pvMBs, pubMBs []float64
	var pvCPU time.Duration
	for range n.downloads {
		cpu0, err := bench.CPUTime(d.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		pvMBs = append(pvMBs, downloadMiBs(t, preview.URL, n.download))
		cpu1, _ := bench.CPUTime(d.cmd.Process.Pid)
		pvCPU += cpu1 - cpu0
		pubMBs = append(pubMBs, downloadMiBs(t, published, n.download))
	}
	cpuPerMiB := pvCPU / time.Duration(max(int64(n.downloads)*n.download>>20, 1))

	follow, execFollow := measureFollow(t, d, sb.ID, box, n.lines)

	var b strings.Builder
	fmt.Fprintf(&b, "## Previews, the port proxy and process output through sandboxd beside `docker exec` and a published port\n\n")
	if m, err := bench.DescribeMachine(ctx(t), dockerClient(t)); err == nil {
		fmt.Fprintf(&b, "%s\n\n", m)
	}
	apiExec, pub := pages["exec-api"], pages["published"]
	fmt.Fprintf(&b, "| GET of a 4 KiB page, one kept-alive connection | n | p50 | p99 | p50 vs `docker exec` (API) | p50 vs published port, same app |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	pageRow := func(name string, s bench.Summary) {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %.2fx | %.2fx |\n", name, s.N, bench.Ms(s.P50), bench.Ms(s.P99), bench.Ratio(s.P50, apiExec.P50), bench.Ratio(s.P50, pub.P50))
	}
	pageRow("**sandboxd, preview link** (no token): signed link checked, a connection dialled by the agent over its pipe", pages["preview"])
	pageRow("**sandboxd, port proxy** (`/v1/sandboxes/{id}/ports/3000/`, the tenant's token)", pages["proxy"])
	pageRow("**peer**: `curl` in the sandbox by a fresh `docker exec` through the Engine API (create, attach, inspect)", apiExec)
	pageRow("**peer**: the same by the `docker exec` command", pages["exec-cli"])
	pageRow("**limit**: a port published by Docker (`-p 127.0.0.1::3000`, `bridge`), a container of the same image and app", pub)
	// The rows below are measured against the same app (Nagle off) published.
	pub = pages["published-nodelay"]
	pageRow("**sandboxd, preview link**, the app with Nagle's algorithm off (`TCP_NODELAY`)", pages["preview-nodelay"])
	pageRow("**limit**: published port, the app with Nagle's algorithm off (`TCP_NODELAY`)", pub)

	fmt.Fprintf(&b, "\n| WebSocket echo round trip, 32-byte text message, one connection | n | p50 | p99 | p50 vs published port |\n| --- | ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| **sandboxd, preview link** | %d | %s | %s | %.2fx |\n", wsPreview.N, bench.Ms(wsPreview.P50), bench.Ms(wsPreview.P99), bench.Ratio(wsPreview.P50, wsPublished.P50))
	fmt.Fprintf(&b, "| **limit**: published port | %d | %s | %s | 1x |\n", wsPublished.N, bench.Ms(wsPublished.P50), bench.Ms(wsPublished.P99))

	fmt.Fprintf(&b, "\n| %s download (median of %d) | MiB/s | vs published port | sandboxd CPU per MiB |\n| --- | ---: | ---: | ---: |\n", bench.MiB(n.download), n.downloads)
	pv, pb := median(pvMBs), median(pubMBs)
	fmt.Fprintf(&b, "| **sandboxd, preview link** | %.1f | %.2fx | %s |\n", pv, pv/pb, bench.Ms(cpuPerMiB))
	fmt.Fprintf(&b, "| **limit**: published port | %.1f | 1x | (no sandboxd in the path) |\n", pb)

	fmt.Fprintf(&b, "\n| A line printed (every 100 ms) to its arrival on the host | n | p50 | p99 |\n| --- | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| **sandboxd**: `GET …/processes/{pid}/output`, `Accept: text/event-stream`, one `output` event | %d | %s | %s |\n", follow.N, bench.Ms(follow.P50), bench.Ms(follow.P99))
	fmt.Fprintf(&b, "| **peer**: the same printer under `docker exec` (the command), its stdout read line by line | %d | %s | %s |\n", execFollow.N, bench.Ms(execFollow.P50), bench.Ms(execFollow.P99))

	fmt.Fprintf(&b, "\nHow: `make bench` (BENCH=previews: `go test ./e2e -run TestPreviewBenchmark` with SANDBOXD_BENCH_EVAL=1). The app is `e2e/testdata/portsrv.py` "+
		"(Python's standard library, a thread per connection), started through `POST /v1/sandboxes/{id}/processes` in a Docker sandbox of network mode `none`, "+
		"and by `docker run` in a `bridge` container of the same image with its ports published on the host's loopback. "+
		"The app as Python leaves it (Nagle's algorithm on) answers a GET in two writes, the headers then the body; the rows marked `TCP_NODELAY` are the same app with Nagle's algorithm off. "+
		"The client is this test on the host (Go's net/http and gorilla/websocket); "+
		"the page paths are measured in turn, request by request, after warm-up requests; %d GETs per HTTP path, %d per `docker exec` path. "+
		"The download is `GET /big?n=%d` read to the end, the paths alternating; sandboxd's CPU is its process's user+system time over the preview downloads (the agent's, in the sandbox, is not counted). "+
		"The printer is `python3 -u` printing `time.time()` every 100 ms; the host reads its clock on arrival (the container shares the host's clock); lines printed before the stream connected are left out.\n",
		n.gets, n.execs, n.download)
	out := os.Getenv("SANDBOXD_BENCH_OUT")
	if out == "" {
		out = "../BENCHMARKS.md"
	}
	if err := bench.Publish(out, "previews", b.String(), smoke, os.Stderr); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}

// sandboxContainer is the Docker container of the sandbox of conv.
func sandboxContainer(t *testing.T, conv string) string {
	t.Helper()
	list, err := dockerClient(t).ContainerList(ctx(t), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelConversation+"="+conv))})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d running containers carry the conversation label %s; want 1", len(list), conv)
	}
	return list[0].ID
}

// startPublishedPeer runs the app in a bridge container of the sandbox
// image, as it is and with Nagle's algorithm off, their ports published on
// the host's loopback, and returns their URLs.
func startPublishedPeer(t *testing.T, dir string) (plain, nodelay string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "portsrv.py"), []byte(portsrvPy), 0o644)
	name := "sandboxd-preview-bench-peer-" + randomHex(t, 4)
	script := fmt.Sprintf("python3 /bench/portsrv.py %d published & exec python3 /bench/portsrv.py %d published nodelay", benchAppPort, benchNodelayPort)
	out, err := exec.Command("docker", "run", "-d", "--rm", "--name", name, "--network", "bridge",
		"-p", fmt.Sprint("127.0.0.1::", benchAppPort), "-p", fmt.Sprint("127.0.0.1::", benchNodelayPort),
		"-v", dir+":/bench:ro", "--entrypoint", "sh", dockerImage(), "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("the published peer does not start: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	urlOf := func(port int) string {
		out, err := exec.Command("docker", "port", name, fmt.Sprint(port, "/tcp")).Output()
		if err != nil {
			t.Fatalf("docker port %s %d: %v", name, port, err)
		}
		url := "http://" + strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]) + "/"
		waitFor(t, 30*time.Second, "the published peer answers on "+url, func() error {
			resp, err := appClient.Get(url + "data.json")
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
		return url
	}
	return urlOf(benchAppPort), urlOf(benchNodelayPort)
}

// measurePages times GETs of the 4 KiB page on every path, in turn, so a
// busy moment of the shared machine falls on all of them alike.
func measurePages(t *testing.T, d *daemon, n previewSizes, box string, urls map[string]string) map[string]bench.Summary {
	t.Helper()
	client := func() *http.Client { return &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second} }
	httpGet := func(c *http.Client, url string, auth bool) func() error {
		return func() error {
			req, _ := http.NewRequest("GET", url, nil)
			if auth {
				req.Header.Set("Authorization", "Bearer "+d.Token)
			}
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if err != nil {
				return err
			}
			if resp.StatusCode != 200 || len(body) != 4096 {
				return fmt.Errorf("GET %s: %d, %d bytes: %.200s", url, resp.StatusCode, len(body), body)
			}
			return nil
		}
	}
	cli := bench.DockerExec{Client: dockerClient(t)}
	inside := fmt.Sprintf("http://127.0.0.1:%d/", benchAppPort)
	type path struct {
		name  string
		get   func() error
		times int
	}
	names := make([]string, 0, len(urls))
	for name := range urls {
		names = append(names, name)
	}
	slices.Sort(names)
	var paths []path
	for _, name := range names {
		paths = append(paths, path{name, httpGet(client(), urls[name], name == "proxy"), n.gets})
	}
	paths = append(paths, []path{
		{"exec-api", func() error {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, errb, code, err := bench.Exec(c, cli, box, "curl", "-sS", inside)
			if err == nil && (code != 0 || len(out) != 4096) {
				err = fmt.Errorf("curl by docker exec: exit %d, %d bytes: %s", code, len(out), errb)
			}
			return err
		}, n.execs},
		{"exec-cli", func() error {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(c, "docker", "exec", box, "curl", "-sS", inside).Output()
			if err == nil && len(out) != 4096 {
				err = fmt.Errorf("curl by the docker exec command: %d bytes", len(out))
			}
			return err
		}, n.execs},
	}...)
	samples := map[string][]time.Duration{}
	for _, p := range paths {
		for range 3 {
			if err := p.get(); err != nil {
				t.Fatalf("warm-up of %s: %v", p.name, err)
			}
		}
	}
	for i := range n.gets {
		for _, p := range paths {
			if i >= p.times {
				continue
			}
			t0 := time.Now()
			if err := p.get(); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			samples[p.name] = append(samples[p.name], time.Since(t0))
		}
	}
	out := map[string]bench.Summary{}
	for k, v := range samples {
		out[k] = bench.Summarize(v)
	}
	return out
}

// measureEchoes times WebSocket round trips on two connections, in turn.
func measureEchoes(t *testing.T, n int, urls ...string) (bench.Summary, bench.Summary) {
	t.Helper()
	conns := make([]*websocket.Conn, len(urls))
	for i, u := range urls {
		c, _, err := websocket.DefaultDialer.DialContext(ctx(t), u, nil)
		if err != nil {
			t.Fatalf("WebSocket to %s: %v", u, err)
		}
		defer c.Close()
		conns[i] = c
	}
	msg := []byte(strings.Repeat("e", 32))
	echo := func(c *websocket.Conn) error {
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
			return err
		}
		_, got, err := c.ReadMessage()
		if err == nil && string(got) != string(msg) {
			err = fmt.Errorf("echoed %q", got)
		}
		return err
	}
	samples := make([][]time.Duration, len(conns))
	for i := range n + 5 {
		for j, c := range conns {
			t0 := time.Now()
			if err := echo(c); err != nil {
				t.Fatalf("echo on %s: %v", urls[j], err)
			}
			if i >= 5 { // the first few warm up
				samples[j] = append(samples[j], time.Since(t0))
			}
		}
	}
	return bench.Summarize(samples[0]), bench.Summarize(samples[1])
}

// downloadMiBs reads GET /big?n=size from the app at base to the end.
func downloadMiBs(t *testing.T, base string, size int64) float64 {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(c, "GET", fmt.Sprintf("%sbig?n=%d", base, size), nil)
	t0 := time.Now()
	resp, err := appClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.Copy(io.Discard, io.LimitReader(resp.Body, size+1))
	took := time.Since(t0)
	if err != nil || resp.StatusCode != 200 || got != size {
		t.Fatalf("download from %s: %d, %d of %d bytes, %v", base, resp.StatusCode, got, size, err)
	}
	return float64(size) / (1 << 20) / took.Seconds()
}

// printerCmd prints "t <unix time>" every 100 ms, count times.
func printerCmd(count int) string {
	return fmt.Sprintf(`python3 -u -c 'import time
for _ in range(%d):
    print("t %%.6f" %% time.time(), flush=True)
    time.sleep(0.1)'`, count)
}

// lineDelays turns lines "t <unix time>" into delays until at, leaving out
// lines printed before since.
func lineDelays(text string, at, since time.Time) []time.Duration {
	var out []time.Duration
	for _, line := range strings.Split(text, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "t ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		printed := time.Unix(0, int64(f*1e9))
		if printed.Before(since) {
			continue
		}
		out = append(out, at.Sub(printed))
	}
	return out
}

// measureFollow times lines from a printer to their arrival: through
// sandboxd's process output stream, and (at the same time) through a
// `docker exec` of the same printer.
func measureFollow(t *testing.T, d *daemon, sbID, box string, lines int) (bench.Summary, bench.Summary) {
	t.Helper()
	count := lines + 20 // the stream connects after the first lines
	c, cancel := context.WithTimeout(context.Background(), time.Duration(count)*100*time.Millisecond+time.Minute)
	defer cancel()

	peer := make(chan []time.Duration, 1)
	go func() {
		var got []time.Duration
		defer func() { peer <- got }()
		cmd := exec.CommandContext(c, "docker", "exec", box, "sh", "-c", printerCmd(count))
		stdout, err := cmd.StdoutPipe()
		if err != nil || cmd.Start() != nil {
			return
		}
		defer cmd.Wait()
		start := time.Now()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && len(got) < lines {
			got = append(got, lineDelays(sc.Text(), time.Now(), start)...)
		}
		cmd.Process.Kill()
	}()

	var p api.Process
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sbID+"/processes", api.StartProcess{Command: printerCmd(count)}, &p, http.StatusCreated)
	req, _ := http.NewRequestWithContext(c, "GET", d.URL+"/v1/sandboxes/"+sbID+"/processes/"+p.ID+"/output?since=0", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := appClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("following %s: %d %s", p.ID, resp.StatusCode, b)
	}
	var got []time.Duration
	var connected time.Time
	name := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for len(got) < lines && sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": connected":
			connected = time.Now()
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name == "exit":
			t.Fatalf("the printer ended after %d timed lines: %s", len(got), line)
		case strings.HasPrefix(line, "data: ") && name == "output" && !connected.IsZero():
			at := time.Now()
			var oc api.OutputChunk
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &oc); err != nil {
				t.Fatalf("an output event: %v: %s", err, line)
			}
			got = append(got, lineDelays(oc.Text, at, connected)...)
		}
	}
	if len(got) < lines {
		t.Fatalf("the output stream ended after %d of %d timed lines: %v", len(got), lines, sc.Err())
	}
	procHTTP(t, d, "DELETE", "/v1/sandboxes/"+sbID+"/processes/"+p.ID, nil, nil, http.StatusNoContent)
	execGot := <-peer
	if len(execGot) < lines {
		t.Fatalf("the docker exec printer gave %d of %d timed lines", len(execGot), lines)
	}
	return bench.Summarize(got[:lines]), bench.Summarize(execGot[:lines])
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
