package debug

import (
	"strings"
	"testing"

	godap "github.com/google/go-dap"
)

// Each adapter is sent only the files it could stop in: debugpy and dart
// their own language, delve and lldb anything compiled (lldb may debug a Go
// binary, delve a cgo program's C).
func TestSplitBreakpointsByAdapter(t *testing.T) {
	bps := map[string][]int{"/w/a.py": {1}, "/w/b.go": {2}, "/w/c.c": {3}, "/w/d.dart": {4}, "/w/e.ts": {5}, "/w/f.rs": {6}, "/w/Makefile": {7}}
	want := map[string][]string{
		adapterDebugpy: {"/w/a.py"},
		adapterDart:    {"/w/d.dart"},
		adapterDelve:   {"/w/Makefile", "/w/b.go", "/w/c.c", "/w/f.rs"},
		adapterLLDB:    {"/w/Makefile", "/w/b.go", "/w/c.c", "/w/f.rs"},
	}
	for adapter, files := range want {
		send, foreign := splitBreakpoints(adapter, bps)
		if len(send)+len(foreign) != len(bps) {
			t.Errorf("%s: %d sent + %d kept back, want %d in all", adapter, len(send), len(foreign), len(bps))
		}
		for _, f := range files {
			if _, ok := send[f]; !ok {
				t.Errorf("%s: %s is not sent; sent %v", adapter, f, send)
			}
		}
		if len(send) != len(files) {
			t.Errorf("%s: sent %v, want only %v", adapter, send, files)
		}
	}
}

// The launch says which breakpoints are placed, a line per file, and in one
// sentence which are not and why: the adapter's reason (its path shown as
// the model gave it) or the file's language.
func TestDescribePlacement(t *testing.T) {
	rel := func(p string) string { return strings.TrimPrefix(p, "/w/") }
	placed := []filePlacement{
		{file: "/w/main.go", lines: []int{5, 9, 12}, bps: []godap.Breakpoint{{Verified: true, Line: 5}, {Verified: true, Line: 10}, {Message: "could not find statement at /w/main.go:12"}}},
		{file: "/w/other/main.go", lines: []int{3, 4}, bps: []godap.Breakpoint{{Message: "could not find file /w/other/main.go"}, {Message: "could not find file /w/other/main.go"}}},
	}
	foreign := map[string][]int{"/w/tools/fetch.py": {7}}
	got := describePlacement(adapterDelve, placed, foreign, rel)
	want := "Breakpoints in main.go: set at 5, 9 (moved to 10).\n" +
		"Not placed for this program (they stay set for a later launch): main.go:12 (could not find statement at main.go:12), " +
		"other/main.go:3,4 (could not find file other/main.go), tools/fetch.py:7 (Python code; delve debugs Go)."
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := describePlacement(adapterLLDB, []filePlacement{{file: "/w/x.go", lines: []int{2}, bps: []godap.Breakpoint{{}}}}, nil, rel); got != "Not placed for this program (they stay set for a later launch): x.go:2 (lldb found no code there)." {
		t.Errorf("an unverified breakpoint without a message: %s", got)
	}
	if got := describePlacement(adapterDebugpy, nil, map[string][]int{"/w/notes.txt": {1}}, rel); !strings.HasSuffix(got, "notes.txt:1 (not Python code; debugpy debugs Python).") {
		t.Errorf("a file of no known language: %s", got)
	}
	if got := describePlacement(adapterDebugpy, nil, nil, rel); got != "" {
		t.Errorf("no breakpoints: %q, want nothing", got)
	}
}
