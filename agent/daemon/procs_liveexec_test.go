package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// TestExecStreamOutputWhileRunning: the first line arrives while the
// command still runs — the command goes on only once the test has seen it
// (it waits for a file the output callback creates) — and the response is
// what a plain exec returns.
func TestExecStreamOutputWhileRunning(t *testing.T) {
	_, c := startPair(t)
	gate := filepath.Join(t.TempDir(), "seen")
	var mu sync.Mutex // guards got
	var got []string
	out := func(o *proto.ExecOutput) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, o.Stream+":"+string(o.Data))
		if strings.Contains(string(o.Data), "first") {
			os.WriteFile(gate, nil, 0o644)
		}
	}
	script := `echo first; while [ ! -e "$1" ]; do sleep 0.02; done; echo oops >&2; echo second`
	r, err := c.ExecStream(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", script, "sh", gate}, Timeout: 20 * time.Second}, out)
	if err != nil {
		t.Fatal(err)
	}
	if r.TimedOut || r.ExitCode != 0 || string(r.Stdout) != "first\nsecond\n" || string(r.Stderr) != "oops\n" {
		t.Fatalf("response %+v (stdout %q stderr %q): the command never saw its first line streamed", r, r.Stdout, r.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(got, "|")
	if !strings.HasPrefix(joined, "stdout:first\n") || !strings.Contains(joined, "stderr:oops\n") || !strings.Contains(joined, "second\n") {
		t.Fatalf("streamed %q", joined)
	}
}

// TestExecStreamCap: each stream is streamed up to MaxBytes, the last
// piece says so, and the response keeps head and tail as usual.
func TestExecStreamCap(t *testing.T) {
	_, c := startPair(t)
	var sent int
	capped := 0
	out := func(o *proto.ExecOutput) {
		if o.Stream == "stdout" {
			sent += len(o.Data)
			if o.Capped {
				capped++
			}
		}
	}
	r, err := c.ExecStream(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", "head -c 10000 /dev/zero"}, MaxBytes: 1000}, out)
	if err != nil {
		t.Fatal(err)
	}
	if sent != 1000 || capped != 1 || len(r.Stdout) != 1000 || r.StdoutOmitted != 9000 {
		t.Fatalf("streamed %d bytes (capped %d times); response %d bytes, %d omitted", sent, capped, len(r.Stdout), r.StdoutOmitted)
	}
}
