package debug_test

import (
	"testing"
	"time"
)

// Sessions counts a launched session while it lives and stops counting it
// once terminated, and once the program ends on its own.
func TestSessionsCount(t *testing.T) {
	h := newHarness(t)
	if n := h.sv.Sessions(); n != 0 {
		t.Fatalf("sessions before launch = %d, want 0", n)
	}
	h.put("requirements.txt", "")
	h.put("loop.py", loopProgram)
	h.ok(op("breakpoints", "file", "loop.py", "lines", []int{h.line("loop.py", "n += 1")}))
	h.ok(op("launch", "program", "loop.py"), h.at("loop.py", "n += 1"))
	if n := h.sv.Sessions(); n != 1 {
		t.Fatalf("sessions while stopped at a breakpoint = %d, want 1", n)
	}
	h.ok(op("terminate"), "Terminated")
	if n := h.sv.Sessions(); n != 0 {
		t.Fatalf("sessions after terminate = %d, want 0", n)
	}

	h.put("short.py", "print('bye')\n")
	h.ok(op("breakpoints", "file", "loop.py", "lines", []int{}))
	h.call(op("launch", "program", "short.py"))
	deadline := time.Now().Add(30 * time.Second)
	for h.sv.Sessions() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a session whose program exited still counts after 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
