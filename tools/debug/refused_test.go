package debug_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// A step the adapter refuses leaves the program stopped where it was:
// lldb refuses stepOut on the worker thread once the main thread has
// stepped. Whichever side refuses, the next calls find the program
// stopped, not "running", and a step still works.
func TestRefusedStepKeepsStop(t *testing.T) {
	h := newHarness(t)
	h.put("CMakeLists.txt", "")
	h.put("threads.c", idsC)
	h.sh("cd " + h.dir + " && gcc -g -O0 -pthread -o threads threads.c")
	work := toolstest.LineOf(t, idsC, "WORK")
	h.ok(op("breakpoints", "file", "threads.c", "lines", []int{work}))
	stop := h.ok(op("launch", "program", "threads"), "Stopped: breakpoint", fmt.Sprintf("threads.c:%d", work))
	worker := num(t, stop, ", thread ")
	var other int
	for _, m := range regexp.MustCompile(`(?m)^- (\d+)`).FindAllStringSubmatch(h.ok(op("threads")), -1) {
		if id, _ := strconv.Atoi(m[1]); id != worker {
			other = id
			break
		}
	}
	if other == 0 {
		t.Fatalf("only one thread listed")
	}
	// Setting up: lldb's step_out of the other thread usually stops within
	// the stop wait; on a loaded machine it may not, and then there is no
	// stop whose keeping could be checked.
	if text, isErr := h.call(op("step_out", "thread_id", other)); isErr || !strings.Contains(text, "Stopped") {
		t.Skipf("lldb's step_out of thread %d did not stop within the wait this time; nothing to refuse:\n%s", other, text)
	}
	before := stopLines(h.ok(op("status"), "Stopped"))
	text, isErr := h.call(op("step_out", "thread_id", worker))
	if !isErr {
		t.Skipf("lldb stepped the worker thread this time; nothing was refused:\n%s", text)
	}
	if strings.Contains(text, "Running") {
		t.Fatalf("after a refused step the session says it runs:\n%s", text)
	}
	if after := stopLines(h.ok(op("status"), "Stopped")); after != before {
		t.Fatalf("the stop moved on a refused step:\nbefore %s\nafter  %s", before, after)
	}
	h.ok(op("stack"), "Stack of thread ")
	h.ok(op("step_out"), "Stopped")
}

// stopLines is a stop report's reason line and its top frame's function
// and place (frame ids may be handed out anew).
func stopLines(text string) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "Stopped") {
			keep = append(keep, l)
		}
		if strings.HasPrefix(l, "#0 ") {
			keep = append(keep, regexp.MustCompile(`\[frame \d+\] `).ReplaceAllString(l, ""))
		}
	}
	return strings.Join(keep, " | ")
}
