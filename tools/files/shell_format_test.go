package files

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

func TestFormatExecSupervised(t *testing.T) {
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := formatExec(&proto.ExecResponse{Left: 18, LeftPIDs: []int{11, 12}, LeftUntil: until}, 2*time.Minute, 8)
	want := "exit status 0\nthe command left 18 processes running in the background (pids 11, 12 and 16 more); they run until this call's timeout of 2m0s has passed since it began (03:04:05 UTC), then they are killed; give a larger timeout_s to keep them longer\n"
	if r.IsError || !strings.HasPrefix(r.Content[0].Text, want) {
		t.Fatalf("background:\n%q\nwant prefix\n%q", r.Content[0].Text, want)
	}
	r = formatExec(&proto.ExecResponse{TimedOut: true, Signal: "KILL", ExitCode: 137, Killed: 23}, 5*time.Second, 8)
	if want := "timed out after 5s; the command and every process it started were killed (23 processes)\n"; !r.IsError || !strings.HasPrefix(r.Content[0].Text, want) {
		t.Fatalf("timeout: %q", r.Content[0].Text)
	}
	r = formatExec(&proto.ExecResponse{Left: 40, LeftUntil: until, OutOfPids: true, PidsInUse: 63, PidsLimit: 64, PidsReserve: 4, Killed: 57}, time.Minute, 8)
	want = "exit status 0\nthe sandbox ran out of processes (63 of 64 in use; 4 are kept free for the sandbox's own tools), so every process this command started was killed (57 processes); look for a command that forks without end\n"
	if !r.IsError || !strings.HasPrefix(r.Content[0].Text, want) {
		t.Fatalf("out of pids:\n%q\nwant prefix\n%q", r.Content[0].Text, want)
	}
}
