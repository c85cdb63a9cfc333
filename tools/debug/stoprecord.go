package debug

import (
	"context"
	"encoding/json"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// The stop record: the session's last stop (or null once it runs on), kept
// beside the adapter's socket and log in the sandbox. Adapters do not say
// again why, or in which thread, they stopped; a sandboxd that restarts
// reads the record to pick the session up where it was (a Go program has
// many goroutines, and only one hit the breakpoint).

func (s *session) stopRecordPath() string { return s.id + ".stop" }

// recordStop writes the current stop to the record when it changed since
// the last write. Every result that describes the run state calls it, so
// what the model was last told is what a restarted sandboxd finds; a
// failed write only costs the exact reason after a restart.
func (s *session) recordStop(ctx context.Context) {
	s.mu.Lock()
	cur, same := s.stop, s.stop == s.recorded
	s.mu.Unlock()
	if same {
		return
	}
	data, _ := json.Marshal(cur)
	if err := s.ag.WriteFiles(ctx, &proto.WriteFilesRequest{Root: runDir, Files: []proto.WriteFile{{Path: s.stopRecordPath(), Data: data}}}); err != nil {
		return
	}
	s.mu.Lock()
	s.recorded = cur
	s.mu.Unlock()
}

// recordedStop reads the record a previous sandboxd left; nil when there
// is none or the session was running.
func (s *session) recordedStop(ctx context.Context) *godap.StoppedEventBody {
	r, err := s.ag.ReadFile(ctx, &proto.ReadFileRequest{Root: runDir, Path: s.stopRecordPath(), MaxBytes: 64 << 10})
	if err != nil {
		return nil
	}
	var b *godap.StoppedEventBody
	if json.Unmarshal(r.Data, &b) != nil {
		return nil
	}
	return b
}
