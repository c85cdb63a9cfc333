package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunBanner runs scripts/run.sh (what `make run` runs) on the host
// backend: once the daemon responds it prints the console URL and the admin
// token, the URL opens the console, and the token is the one in DATA_DIR.
func TestMakeRunBanner(t *testing.T) {
	root, _ := filepath.Abs("../..")
	if os.Getenv("SANDBOXD_BIN") == "" {
		t.Skip("set SANDBOXD_BIN (make test does) after `make build`: scripts/run.sh serves bin/sandboxd")
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "sandboxd")); err != nil {
		t.Skipf("no bin/sandboxd to serve (%v); run make build", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	dataDir := t.TempDir()

	cmd := exec.Command("scripts/run.sh")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "LISTEN="+listen, "DATA_DIR="+dataDir, "BACKEND=host", "CONFIG=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})

	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var console, token string
	deadline := time.After(3 * time.Minute)
	for console == "" || token == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("run.sh ended before it printed the console and token (console %q, token %q)", console, token)
			}
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "console: "); ok {
				console = v
			}
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "token: "); ok {
				token = strings.TrimSpace(v)
			}
		case <-deadline:
			t.Fatalf("run.sh printed no console URL and token within 3 minutes (console %q, token %q)", console, token)
		}
	}
	go func() { // keep the pipe drained
		for range lines {
		}
	}()
	if console != "http://"+listen+"/" {
		t.Errorf("console URL %q, want http://%s/", console, listen)
	}
	file, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil || strings.TrimSpace(string(file)) != token {
		t.Errorf("printed token %q, DATA_DIR/token %q (%v)", token, file, err)
	}
	resp, err := http.Get(console)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/" {
		t.Errorf("GET %s ended at %s with %d, want the console at /ui/", console, resp.Request.URL.Path, resp.StatusCode)
	}
}
