package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// echoAdapter listens on the unix socket given as --listen unix:PATH (as
// dlv dap does), echoes one connection upper-cased, then exits 0.
const echoAdapter = `import socket, sys
path = sys.argv[sys.argv.index("--listen") + 1][len("unix:"):]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(1)
c, _ = s.accept()
while True:
    b = c.recv(65536)
    if not b:
        break
    c.sendall(b.upper())
c.close()
`

// The bridge speaks the adapter's socket on its stdio, and ends with the
// adapter when the connection ends.
func TestDAPBridgeSpeaksTheSocketOnStdio(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the fake adapter needs python3")
	}
	dir := t.TempDir()
	sock, logf := filepath.Join(dir, "run", "a.sock"), filepath.Join(dir, "a.log")
	cmd := exec.Command(binary, "dap-bridge", "--socket", sock, "--log", logf, "--wait", "20s", "--",
		"python3", "-c", echoAdapter, "--listen", "unix:"+sock)
	cmd.Stdin = strings.NewReader("content-length: 2\r\n\r\n{}")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitWithin(t, cmd, 30*time.Second, "dap-bridge did not end with its adapter"); err != nil {
		t.Fatalf("dap-bridge: %v\n%s", err, errb.String())
	}
	if out.String() != "CONTENT-LENGTH: 2\r\n\r\n{}" {
		t.Errorf("stdout = %q, want the adapter's answer", out.String())
	}
}

// An adapter that exits before it listens: the bridge ends with its exit
// code, and the adapter's words are in the log.
func TestDAPBridgeAdapterExitsEarly(t *testing.T) {
	dir := t.TempDir()
	logf := filepath.Join(dir, "a.log")
	cmd := exec.Command(binary, "dap-bridge", "--socket", filepath.Join(dir, "a.sock"), "--log", logf, "--",
		"sh", "-c", "echo cannot start >&2; exit 7")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("dap-bridge = %v, want exit 7 like the adapter", err)
	}
	if b, _ := os.ReadFile(logf); !strings.Contains(string(b), "cannot start") {
		t.Errorf("log = %q, want the adapter's stderr", b)
	}
	out, err := exec.Command(binary, "dap-bridge", "--socket", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "usage: sandbox-agent dap-bridge") {
		t.Errorf("dap-bridge without an adapter = %v, %s; want the usage", err, out)
	}
}
