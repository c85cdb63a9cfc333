package dap

import (
	"encoding/json"
	"strings"
	"testing"

	godap "github.com/google/go-dap"
)

// Clearing a file sends empty arrays, not missing fields (which debugpy
// refuses and drops its session over).
func TestSetBreakpointsSendsEmptyArrays(t *testing.T) {
	for _, lines := range [][]int{nil, {}} {
		b, err := json.Marshal(NewSetBreakpoints(godap.Source{Path: "/w/calc.py", Name: "calc.py"}, lines))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"breakpoints":[]`, `"lines":[]`, `"path":"/w/calc.py"`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("lines %v: %s lacks %s", lines, b, want)
			}
		}
	}
	b, _ := json.Marshal(NewSetBreakpoints(godap.Source{Path: "/w/a.go"}, []int{3, 9}))
	if !strings.Contains(string(b), `"breakpoints":[{"line":3},{"line":9}]`) || !strings.Contains(string(b), `"lines":[3,9]`) {
		t.Errorf("two lines: %s", b)
	}
}
