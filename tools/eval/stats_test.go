package eval_test

import (
	"maps"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Kernels reports what is live now: a started kernel counts under its
// language, a killed one stops counting once its pipe ends, and a closed
// tool counts none (the kernels keep running in the agent, detached).
func TestKernelsCount(t *testing.T) {
	b := hostBox(t)
	if got := b.tool.Kernels(); len(got) != 0 {
		t.Fatalf("kernels before any cell = %v, want none", got)
	}
	b.ok("python", "x = 1")
	b.ok("javascript", "let y = 2")
	if got, want := b.tool.Kernels(), map[string]int{"python": 1, "javascript": 1}; !maps.Equal(got, want) {
		t.Fatalf("kernels = %v, want %v", got, want)
	}

	p := b.kernelProc("python")
	c, _ := b.conn(b.ctx())
	if err := c.Signal(b.ctx(), &proto.SignalRequest{ID: p.ID, Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.tool.Kernels()["python"] != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a killed kernel still counts after 10s: %v", b.tool.Kernels())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := b.tool.Kernels()["javascript"]; got != 1 {
		t.Fatalf("javascript kernels = %d after python died, want 1", got)
	}

	b.tool.Close()
	if got := b.tool.Kernels(); len(got) != 0 {
		t.Fatalf("kernels after Close = %v, want none", got)
	}
}
