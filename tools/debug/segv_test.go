package debug_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/toolstest"
)

// measure hands a NULL string to strlen: the fault is raised inside libc,
// one frame below the user's line.
const segvC = `#include <stdio.h>
#include <string.h>

static size_t measure(const char *s) {
    return strlen(s); /* FAULT */
}

int main(void) {
    const char *name = NULL;
    printf("start\n");
    fflush(stdout);
    return (int)measure(name);
}
`

// A segfault inside libc is reported at the user's call, with libc's frame
// named below it, on lldb.
func TestCSegfaultStopsAtUserFrame(t *testing.T) {
	h := newHarness(t)
	h.put("CMakeLists.txt", "")
	h.put("seg.c", segvC)
	h.sh("cd " + h.dir + " && gcc -g -O0 -o seg seg.c")
	at := fmt.Sprintf("measure at seg.c:%d", toolstest.LineOf(t, segvC, "FAULT"))
	text := h.ok(op("launch", "program", "seg"), "Stopped:", at, "strlen(s)")
	first := text[strings.Index(text, "\n#")+1:]
	if !strings.Contains(strings.SplitN(first, "\n", 2)[0], at) {
		t.Errorf("the stop's frame is not the user's:\n%s", text)
	}
	// libc's frame below is named with its module, as stack names it.
	if !strings.Contains(text, "libc.so.6, no source)") || strings.Contains(text, "at strlen") {
		t.Errorf("the frame raising the fault is not named with its module:\n%s", text)
	}
}
