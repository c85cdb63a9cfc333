// Package e2e drives the built sandboxd binary over HTTP exactly as the
// agent platform does: start `sandboxd serve`, read the token it wrote, and
// call the API with the Go client. Docker cases run when
// SANDBOXD_TEST_DOCKER=1; the host backend always runs.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/api/openapi/openapitest"
)

// bins holds the binaries under test: SANDBOXD_BIN / SANDBOXD_AGENT_BIN
// when set (CI builds them once with `make build`), else built here.
var bins struct {
	sandboxd, agent string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	bins.sandboxd = os.Getenv("SANDBOXD_BIN")
	bins.agent = os.Getenv("SANDBOXD_AGENT_BIN")
	if bins.sandboxd == "" || bins.agent == "" {
		dir, err := os.MkdirTemp("", "sandboxd-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bins.sandboxd = filepath.Join(dir, "sandboxd")
		bins.agent = filepath.Join(dir, "sandbox-agent")
		for out, pkg := range map[string]string{bins.sandboxd: "../cmd/sandboxd", bins.agent: "../cmd/sandbox-agent"} {
			cmd := exec.Command("go", "build", "-o", out, pkg)
			if out == bins.agent {
				// The agent runs in any image: static. sandboxd keeps cgo
				// (the tree-sitter engine needs it).
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			}
			if b, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, b)
				return 1
			}
		}
	}
	// Every client that leaves its transport unset (the Go client, and
	// http.DefaultClient) goes through the contract check.
	contract.base = http.DefaultTransport
	http.DefaultTransport = contract
	return m.Run()
}

// daemon is one running `sandboxd serve`.
type daemon struct {
	t       *testing.T
	backend string
	dataDir string
	args    []string
	URL     string
	Token   string
	Client  *client.Client

	cmd  *exec.Cmd
	done chan struct{}
	logs *capBuffer

	mu       sync.Mutex // guards problems
	problems []string   // responses that did not fit the OpenAPI document
}

// startDaemon starts sandboxd on a free loopback port with the given
// backend and data dir, waits until /readyz responds, and stops it at cleanup.
func startDaemon(t *testing.T, backend, dataDir string, extra ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, backend: backend, dataDir: dataDir, args: extra}
	d.start()
	t.Cleanup(d.stop)
	t.Cleanup(d.reportContract)
	t.Cleanup(d.deleteLeftovers)
	return d
}

// deleteLeftovers deletes, at the end of the test, the sandboxes the
// daemon still lists for its token: a sandbox outlives its daemon on
// purpose (the host backend's agent daemon keeps running, a container
// stays), so one a test forgot would be left on the machine.
func (d *daemon) deleteLeftovers() {
	select {
	case <-d.done:
		return // stopped by the test; a later daemon on the data dir cleans up
	default:
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbs, err := d.Client.ListSandboxes(c, "")
	if err != nil {
		return
	}
	for _, sb := range sbs {
		if err := d.Client.DeleteSandbox(c, sb.ID); err != nil {
			d.t.Logf("a sandbox left by the test (%s) could not be deleted: %v", sb.ID, err)
		}
	}
	// Snapshots outlive their sandboxes, and no later daemon of this
	// test's deployment would ever sweep them.
	snaps, _ := d.Client.ListSnapshots(c)
	for _, sn := range snaps {
		if err := d.Client.DeleteSnapshot(c, sn.ID); err != nil {
			d.t.Logf("a snapshot left by the test (%s) could not be deleted: %v", sn.ID, err)
		}
	}
}

func (d *daemon) start() {
	t := d.t
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", d.dataDir,
		"--backend", d.backend, "--agent-binary", bins.agent}, d.args...)
	cmd := exec.Command(bins.sandboxd, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.logs = &capBuffer{max: 1 << 20}
	cmd.Stderr = d.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.cmd, d.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(d.done) }()

	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "serving on "); i >= 0 {
				f := strings.Fields(line[i+len("serving on "):])
				if len(f) > 0 {
					select {
					case urlc <- f[0]:
					default:
					}
				}
			}
		}
	}()
	select {
	case d.URL = <-urlc:
	case <-d.done:
		t.Fatalf("sandboxd exited before serving:\n%s", d.logs.String())
	case <-time.After(60 * time.Second):
		d.kill()
		t.Fatalf("sandboxd printed no URL within 60s:\n%s", d.logs.String())
	}
	tok, err := os.ReadFile(filepath.Join(d.dataDir, "token"))
	if err != nil {
		t.Fatalf("admin token file: %v", err)
	}
	d.Token = strings.TrimSpace(string(tok))
	d.Client, err = client.New(d.URL, d.Token)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "sandboxd ready", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return d.Client.Readyz(ctx)
	})
	if err := contract.watch(d); err != nil {
		t.Fatal(err)
	}
}

// contract checks every /v1 response that a daemon of this process gives
// against the OpenAPI document (GET /v1/openapi.json) the first daemon
// served, and charges each mismatch to the daemon's test. It is the
// process's http.DefaultTransport, so the calls tests make with the Go
// client or http.DefaultClient are all checked without asking for it;
// responses of other servers pass untouched.
var contract = &contractCheck{daemons: map[string]*daemon{}}

type contractCheck struct {
	base http.RoundTripper

	mu      sync.Mutex           // guards checker and daemons
	checker *openapitest.Checker // nil until the first daemon served its document
	daemons map[string]*daemon   // by host:port
}

var _ http.RoundTripper = (*contractCheck)(nil)

// watch starts checking d's responses, fetching the document first if no
// daemon has yet.
func (c *contractCheck) watch(d *daemon) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checker == nil {
		chk, err := fetchContract(c.base, d.URL)
		if err != nil {
			return err
		}
		c.checker = chk
	}
	host := strings.TrimPrefix(strings.TrimPrefix(d.URL, "http://"), "https://")
	c.daemons[strings.TrimSuffix(host, "/")] = d
	return nil
}

// fetchContract reads the daemon's OpenAPI document, without a token.
func fetchContract(rt http.RoundTripper, url string) (*openapitest.Checker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/v1/openapi.json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /v1/openapi.json: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("GET /v1/openapi.json: %w", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		return nil, fmt.Errorf("GET /v1/openapi.json answered %d (%s): %.500s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return openapitest.New(b)
}

func (c *contractCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	chk, d := c.checker, c.daemons[req.URL.Host]
	c.mu.Unlock()
	if chk == nil || d == nil {
		return c.base.RoundTrip(req)
	}
	return chk.Transport(c.base, "/v1/", d.contractProblem).RoundTrip(req)
}

// contractProblem records a response that did not fit the document.
func (d *daemon) contractProblem(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.problems) < 50 {
		d.problems = append(d.problems, err.Error())
	}
}

// reportContract fails the test with every response that did not fit.
func (d *daemon) reportContract() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.problems {
		d.t.Errorf("the API answered outside its OpenAPI document (GET /v1/openapi.json): %s", p)
	}
}

// restart stops the daemon (SIGTERM, as an operator would) and starts it
// again on the same data dir.
func (d *daemon) restart() {
	d.stop()
	d.start()
}

func (d *daemon) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.t.Errorf("sandboxd did not stop within 30s of SIGTERM")
		d.kill()
	}
	if d.t.Failed() {
		d.t.Logf("sandboxd log:\n%s", d.logs.String())
	}
}

func (d *daemon) kill() {
	d.cmd.Process.Kill()
	<-d.done
}

// waitFor polls check until it returns nil or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	var err error
	for {
		if err = check(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ctx returns a context bounded for one test step.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// capBuffer keeps the first max bytes of a log.
type capBuffer struct {
	mu  sync.Mutex // guards b
	b   []byte
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

var _ io.Writer = (*capBuffer)(nil)

var errNotYet = errors.New("not yet")
