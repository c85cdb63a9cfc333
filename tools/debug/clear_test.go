package debug_test

import (
	"fmt"
	"testing"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// Two files: a loop in the main file calls tick three times, then the
// other file's finish once. Each program prints "total 6".
const clearPyMain = `from fin import finish

def tick(i):
    return i * 2  # TICK

total = 0
for i in range(4):
    total += tick(i)
finish(total)
`

const clearPyFin = `def finish(total):
    print("total", total)  # FINISH
`

const clearGoMain = `package main

func tick(i int) int {
	return i * 2 // TICK
}

func main() {
	total := 0
	for i := 0; i < 4; i++ {
		total += tick(i)
	}
	finish(total)
}
`

const clearGoFin = `package main

import "fmt"

func finish(total int) {
	fmt.Println("total", total) // FINISH
}
`

const clearCMain = `void finish(int total);

static int tick(int i) {
    return i * 2; /* TICK */
}

int main(void) {
    int total = 0;
    for (int i = 0; i < 4; i++)
        total += tick(i);
    finish(total);
    return 0;
}
`

const clearCFin = `#include <stdio.h>

void finish(int total) {
    printf("total %d\n", total); /* FINISH */
}
`

// Clearing one file's breakpoints mid-session, on every adapter: the
// session lives on, the cleared loop no longer stops, the other file's
// breakpoint still does, and the program ends normally.
func TestClearBreakpointsMidSession(t *testing.T) {
	cases := []struct {
		name, main, fin, mainSrc, finSrc, program, setup string
		files                                            map[string]string
	}{
		{name: "debugpy", main: "main.py", fin: "fin.py", mainSrc: clearPyMain, finSrc: clearPyFin, program: "main.py",
			files: map[string]string{"requirements.txt": ""}},
		{name: "delve", main: "main.go", fin: "fin.go", mainSrc: clearGoMain, finSrc: clearGoFin, program: "main.go",
			files: map[string]string{"go.mod": "module example.com/clear\n\ngo 1.22\n"}},
		{name: "lldb", main: "main.c", fin: "fin.c", mainSrc: clearCMain, finSrc: clearCFin, program: "prog",
			files: map[string]string{"CMakeLists.txt": "cmake_minimum_required(VERSION 3.10)\nproject(prog C)\nadd_executable(prog main.c fin.c)\n"}, setup: "gcc -g -O0 -o prog main.c fin.c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for f, c := range tc.files {
				h.put(f, c)
			}
			h.put(tc.main, tc.mainSrc)
			h.put(tc.fin, tc.finSrc)
			if tc.setup != "" {
				h.sh("cd " + h.dir + " && " + tc.setup)
			}
			tick, finish := toolstest.LineOf(t, tc.mainSrc, "TICK"), toolstest.LineOf(t, tc.finSrc, "FINISH")
			h.ok(op("breakpoints", "file", tc.main, "lines", []int{tick}))
			h.ok(op("breakpoints", "file", tc.fin, "lines", []int{finish}))
			h.ok(op("launch", "program", tc.program), "Stopped: breakpoint", fmt.Sprintf("%s:%d", tc.main, tick))
			h.ok(op("continue"), "Stopped: breakpoint", fmt.Sprintf("%s:%d", tc.main, tick))
			h.ok(op("breakpoints", "file", tc.main, "lines", []int{}), "Cleared the breakpoints of "+tc.main)
			h.ok(op("status"), "Session: "+tc.name, "Stopped")
			// Two more ticks would stop here if the clear had not reached
			// the adapter; the next stop is the other file's.
			h.ok(op("continue"), "Stopped: breakpoint", fmt.Sprintf("%s:%d", tc.fin, finish))
			h.ok(op("continue"), "exited with code 0")
			h.ok(op("output"), "total 12")
		})
	}
}
