package debug_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// lldb frames in libc have no source: every result gives them one form,
// with the library's name, and never a made-up file:line.
func TestLLDBFramesWithoutSource(t *testing.T) {
	h := newHarness(t)
	h.put("CMakeLists.txt", "")
	h.put("threads.c", idsC)
	h.sh("cd " + h.dir + " && gcc -g -O0 -pthread -o threads threads.c")
	h.ok(op("breakpoints", "file", "threads.c", "lines", []int{toolstest.LineOf(t, idsC, "WORK")}))
	h.ok(op("launch", "program", "threads"), "Stopped: breakpoint")
	stack := h.ok(op("stack"), "work at threads.c:", "(libc.so.6, no source)")
	// step_out of work lands in libc's thread start (the other threads'
	// breakpoints cleared first, so they do not stop it there).
	h.ok(op("breakpoints", "file", "threads.c", "lines", []int{}), "Cleared")
	out := h.ok(op("step_out"), "Stopped", "(libc.so.6, no source)")
	madeUp := regexp.MustCompile(`\] (\S+) at (\S+):\d+`)
	for _, text := range []string{stack, out} {
		for _, line := range strings.Split(text, "\n") {
			if m := madeUp.FindStringSubmatch(line); m != nil && (m[1] == m[2] || !strings.Contains(m[2], ".")) {
				t.Errorf("a frame without source shows a made-up place: %q", line)
			}
		}
	}
}
