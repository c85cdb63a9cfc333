package debug_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// Several threads each run work; the breakpoint is in work.
const idsPy = `import threading

results = {}

def work(n):
    results[n] = n * n  # WORK

threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done", sorted(results.values()))
`

const idsGo = `package main

import (
	"fmt"
	"sync"
)

type pool struct {
	mu  sync.Mutex
	got []int
}

func (p *pool) work(n int) {
	p.mu.Lock()
	p.got = append(p.got, n*n) // WORK
	p.mu.Unlock()
}

func main() {
	p := &pool{}
	var wg sync.WaitGroup
	for n := 0; n < 3; n++ {
		wg.Add(1)
		go func() { defer wg.Done(); p.work(n) }()
	}
	wg.Wait()
	fmt.Println("done", len(p.got))
}
`

const idsC = `#include <pthread.h>
#include <stdio.h>

static int results[3];

static void *work(void *arg) {
    int n = *(int *)arg;
    results[n] = n * n; /* WORK */
    return NULL;
}

int main(void) {
    pthread_t t[3];
    int args[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, work, &args[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("done %d\n", results[2]);
    return 0;
}
`

// Ids the session never handed out are refused before they reach the
// adapter, with the valid ones listed; the session stays stopped where it
// was and the real ids still work.
func TestUnknownIDsRefused(t *testing.T) {
	cases := []struct{ name, file, src, program, marker, setup string }{
		{"debugpy", "threads.py", idsPy, "threads.py", "requirements.txt", ""},
		{"delve", "pool.go", idsGo, "pool.go", "go.mod", ""},
		{"lldb", "threads.c", idsC, "threads", "CMakeLists.txt", "gcc -g -O0 -pthread -o threads threads.c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			marker := ""
			if tc.marker == "go.mod" {
				marker = "module example.com/ids\n\ngo 1.22\n"
			}
			h.put(tc.marker, marker)
			h.put(tc.file, tc.src)
			if tc.setup != "" {
				h.sh("cd " + h.dir + " && " + tc.setup)
			}
			at := fmt.Sprintf("%s:%d", tc.file, toolstest.LineOf(t, tc.src, "WORK"))
			h.ok(op("breakpoints", "file", tc.file, "lines", []int{toolstest.LineOf(t, tc.src, "WORK")}))
			stop := h.ok(op("launch", "program", tc.program), "Stopped: breakpoint", at)
			frame := num(t, stop, "[frame ")
			const bogus = 987654321
			h.bad(op("scopes", "frame_id", bogus), "valid frame ids: "+strconv.Itoa(frame)+" (")
			h.bad(op("evaluate", "expression", "1+1", "frame_id", bogus), "frame_id 987654321 was not handed out")
			h.bad(op("variables", "reference", bogus), "call scopes with a frame_id")
			h.bad(op("step_over", "thread_id", bogus), "is not a thread of the debuggee; its threads are: ")
			h.bad(op("stack", "thread_id", bogus), "is not a thread of the debuggee")
			h.ok(op("status"), "Stopped: breakpoint", at)
			scopes := h.ok(op("scopes", "frame_id", frame), "Locals")
			ref := refOf(t, scopes, "Locals")
			h.ok(op("variables", "reference", ref), "n ")
			h.bad(op("variables", "reference", ref+bogus), "valid references: ")
			// The next stop hands out its own frame, which is accepted.
			next := h.ok(op("continue"), "Stopped: breakpoint", at)
			h.ok(op("scopes", "frame_id", num(t, next, "[frame ")), "Locals")
		})
	}
}
