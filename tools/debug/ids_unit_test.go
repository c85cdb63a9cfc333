package debug

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/tools/debug/dap"
)

func stoppedEvent(t *testing.T, s *session, b godap.StoppedEventBody) {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	s.Event(&dap.Message{Type: "event", Event: "stopped", Body: raw})
}

// Frame ids and references hold for the stop they were shown in; the
// refusal lists the valid ones, capped.
func TestHandedIDsBelongToTheirStop(t *testing.T) {
	s := newSession("s1", adapterDelve, nil)
	stoppedEvent(t, s, godap.StoppedEventBody{Reason: "breakpoint", ThreadId: 7})
	var frames []godap.StackFrame
	for i := 0; i < maxListedIDs+5; i++ {
		frames = append(frames, godap.StackFrame{Id: 1000 + i, Name: fmt.Sprintf("main.f%d", i)})
	}
	s.noteFrames(frames)
	s.noteRefs(5, 0, 6)
	if err := s.checkFrame(1003); err != nil {
		t.Fatalf("a frame shown in this stop is refused: %v", err)
	}
	err := s.checkFrame(42)
	if err == nil || !strings.Contains(err.Error(), "valid frame ids: 1000 (main.f0), 1001 (main.f1)") || !strings.Contains(err.Error(), "and 5 more") {
		t.Fatalf("unknown frame: %v", err)
	}
	if err := s.checkRef(6); err != nil {
		t.Fatal(err)
	}
	if err := s.checkRef(0); err == nil || !strings.Contains(err.Error(), "valid references: 5, 6.") {
		t.Fatalf("reference 0 (never handed out): %v", err)
	}
	if !s.idsCurrentLocked().threads[7] {
		t.Fatalf("the stop's thread is not known")
	}
	stoppedEvent(t, s, godap.StoppedEventBody{Reason: "step", ThreadId: 8})
	if err := s.checkFrame(1003); err == nil || !strings.Contains(err.Error(), "call stack") {
		t.Fatalf("a frame of the previous stop is accepted: %v", err)
	}
	if err := s.checkRef(5); err == nil {
		t.Fatalf("a reference of the previous stop is accepted")
	}
}

// A refused resume puts the same stop back; one that was followed by a
// new stop or the end does not.
func TestRestoreStop(t *testing.T) {
	s := newSession("s1", adapterLLDB, nil)
	stoppedEvent(t, s, godap.StoppedEventBody{Reason: "breakpoint", ThreadId: 3})
	before := s.state()
	s.noteFrames([]godap.StackFrame{{Id: 9, Name: "main"}})
	s.mu.Lock()
	s.stop = nil
	s.mu.Unlock()
	if !s.restoreStop(before) || s.state().stop != before.stop {
		t.Fatalf("the stop was not restored")
	}
	if err := s.checkFrame(9); err != nil {
		t.Fatalf("the restored stop lost its frames: %v", err)
	}
	s.mu.Lock()
	s.stop = nil
	s.mu.Unlock()
	stoppedEvent(t, s, godap.StoppedEventBody{Reason: "step", ThreadId: 3})
	if s.restoreStop(before) || s.state().stop.Reason != "step" {
		t.Fatalf("a newer stop was overwritten")
	}
}

// lldb's SIGSTOP is a pause only when a pause was asked for.
func TestSIGSTOPAfterPause(t *testing.T) {
	s := newSession("s1", adapterLLDB, nil)
	sig := godap.StoppedEventBody{Reason: "exception", Description: "signal SIGSTOP", ThreadId: 1}
	stoppedEvent(t, s, sig)
	if r := s.state().stop.Reason; r != "exception" {
		t.Fatalf("an unasked SIGSTOP became %q", r)
	}
	s.mu.Lock()
	s.pausing = true
	s.mu.Unlock()
	stoppedEvent(t, s, sig)
	if st := s.state().stop; st.Reason != "pause" || st.Description != "" {
		t.Fatalf("after pause: %+v", st)
	}
}

// Module events name modules; removed ones are forgotten.
func TestModuleEvents(t *testing.T) {
	s := newSession("s1", adapterLLDB, nil)
	s.noteModule(godap.ModuleEventBody{Reason: "new", Module: godap.Module{Id: "A1", Path: "/lib/x86_64-linux-gnu/libc.so.6"}})
	s.noteModule(godap.ModuleEventBody{Reason: "new", Module: godap.Module{Id: 2.0, Name: "prog"}})
	if s.modules["A1"] != "libc.so.6" || s.modules["2"] != "prog" {
		t.Fatalf("modules: %v", s.modules)
	}
	s.noteModule(godap.ModuleEventBody{Reason: "removed", Module: godap.Module{Id: "A1"}})
	if _, ok := s.modules["A1"]; ok {
		t.Fatalf("a removed module is kept")
	}
}
