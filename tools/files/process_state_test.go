package files_test

import (
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools/files"
)

// A process's state in words, as the process tool and the HTTP API give
// it: its own status, or the sandbox's hibernation that stopped it.
func TestStateText(t *testing.T) {
	three := 3
	for _, tc := range []struct {
		p    proto.ProcInfo
		want string
	}{
		{proto.ProcInfo{State: proto.ProcRunning}, "running"},
		{proto.ProcInfo{State: proto.ProcExited, ExitCode: &three}, "exited 3"},
		{proto.ProcInfo{State: proto.ProcKilled, Signal: "TERM"}, "killed by SIGTERM"},
		{proto.ProcInfo{State: proto.ProcKilled, Signal: "KILL", OOMKilled: true}, "killed by SIGKILL (the out-of-memory killer)"},
		{proto.ProcInfo{State: proto.ProcStopped, Hibernated: true}, "stopped by hibernation"},
		{proto.ProcInfo{State: proto.ProcExited}, "ended (its status is not known)"},
	} {
		if got := files.StateText(tc.p); got != tc.want {
			t.Errorf("StateText(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}
