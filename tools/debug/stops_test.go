package debug_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// A nil-map write panics three runtime frames below the user's line.
const panicGo = `package main

import "fmt"

func boom(m map[string]int) {
	m["x"] = 1 // BOOM
}

func main() {
	fmt.Println("start")
	var m map[string]int
	boom(m)
}
`

// main spins forever beside goroutines parked in the runtime.
const spinGo = `package main

import "time"

func spin(n *int) {
	for {
		*n++ // SPIN
	}
}

func main() {
	for i := 0; i < 4; i++ {
		go func() { time.Sleep(time.Hour) }()
	}
	n := 0
	spin(&n)
}
`

const spinC = `int main(void) {
    volatile unsigned long n = 0;
    for (;;)
        n++; /* SPIN */
}
`

// A Go panic is reported at the user's line, not runtime.fatalpanic; the
// runtime frames under it are named and stack still shows them all.
func TestGoPanicStopsAtUserFrame(t *testing.T) {
	h := newHarness(t)
	h.sh("mkdir -p " + h.dir + "/crash")
	h.put("go.mod", "module example.com/p\n\ngo 1.22\n")
	h.put("crash/main.go", panicGo)
	at := fmt.Sprintf("main.boom at crash/main.go:%d", toolstest.LineOf(t, panicGo, "BOOM"))
	text := h.ok(op("launch", "program", "crash/main.go"), "Stopped: exception", "nil map", at, `m["x"] = 1`, "runtime.fatalpanic")
	first := text[strings.Index(text, "\n#")+1:]
	if !strings.Contains(strings.SplitN(first, "\n", 2)[0], at) {
		t.Errorf("the stop's frame is not the user's:\n%s", text)
	}
	h.ok(op("stack"), "#0", "runtime.fatalpanic", at)
}

// A Python exception raised inside the standard library is reported at the
// user's call.
func TestPythonLibraryExceptionStopsAtUserFrame(t *testing.T) {
	h := newHarness(t)
	src := "import json\n\n\ndef load(text):\n    return json.loads(text)  # LOAD\n\n\nload(\"{not json\")\n"
	h.put("pyproject.toml", "[project]\nname = \"p\"\n")
	h.put("loader.py", src)
	h.ok(op("launch", "program", "loader.py"), "Stopped: exception", "JSONDecodeError", fmt.Sprintf("load at loader.py:%d", toolstest.LineOf(t, src, "LOAD")))
}

// pause on a program in an endless loop says paused and shows the loop in
// the user's code, on delve (among parked goroutines) and lldb (which
// stops with SIGSTOP).
func TestPauseEndlessLoop(t *testing.T) {
	t.Run("delve", func(t *testing.T) {
		h := newHarness(t)
		h.sh("mkdir -p " + h.dir + "/loop")
		h.put("go.mod", "module example.com/p\n\ngo 1.22\n")
		h.put("loop/main.go", spinGo)
		h.ok(op("launch", "program", "loop/main.go"), "Running")
		text := h.ok(op("pause"), "Stopped: pause", "main.spin at loop/main.go:")
		h.ok(op("stack"), "Stack of thread "+fmt.Sprint(num(t, text, ", thread ")), "main.main at loop/main.go:")
	})
	t.Run("lldb", func(t *testing.T) {
		h := newHarness(t)
		h.put("CMakeLists.txt", "")
		h.put("spin.c", spinC)
		h.sh("cd " + h.dir + " && gcc -g -O0 -o spin spin.c")
		h.ok(op("launch", "program", "spin"), "Running")
		text := h.ok(op("pause"), "Stopped: pause", "main at spin.c:")
		if strings.Contains(text, "SIGSTOP") {
			t.Errorf("a pause is told as a signal:\n%s", text)
		}
	})
}
