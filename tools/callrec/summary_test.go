package callrec

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/tools"
)

func TestSummaryHidesFileTextAndShortensCode(t *testing.T) {
	cases := []struct {
		args     string
		want     string
		mustLack string
	}{
		{`{"path":"main.go","content":"API_KEY=sk-live-123"}`, `path="main.go" content=<19 bytes>`, "sk-live"},
		{`{"path":"a.go","old":"password1","new":"password2"}`, `path="a.go" old=<9 bytes> new=<9 bytes>`, "password"},
		{`{"patch":"*** Begin Patch\nsecret"}`, `patch=<22 bytes>`, "secret"},
		{`{"code":"import os\nprint(os.environ['TOKEN'])"}`, `code="import os"+1 lines`, "TOKEN"},
		{`{"command":"ls -la","timeout_s":30}`, `command="ls -la" timeout_s=30`, ""},
		{`{"env":{"B":"2","A":"hunter2"}}`, `env={A,B}`, "hunter2"},
		{`{}`, ``, ""},
	}
	for _, c := range cases {
		got := Summarize(json.RawMessage(c.args))
		if got != c.want {
			t.Errorf("Summarize(%s) = %q, want %q", c.args, got, c.want)
		}
		if c.mustLack != "" && strings.Contains(got, c.mustLack) {
			t.Errorf("Summarize(%s) = %q shows %q", c.args, got, c.mustLack)
		}
	}
}

func TestSummaryIsAtMost120Characters(t *testing.T) {
	long := strings.Repeat("é", 500)
	args, _ := json.Marshal(map[string]any{"a": long, "b": long, "c": []int{1, 2, 3}, "code": long})
	got := Summarize(args)
	if n := utf8.RuneCountInString(got); n > MaxArgs {
		t.Fatalf("summary has %d characters, want at most %d", n, MaxArgs)
	}
	if !strings.HasSuffix(got, "…") {
		t.Fatalf("a cut summary %q does not say it was cut", got)
	}
	if !utf8.ValidString(got) {
		t.Fatal("the summary cuts inside a character")
	}
}

func TestDiagnosticsCountsTheHooksNewProblems(t *testing.T) {
	res := tools.Result{Content: []tools.Block{
		{Type: "text", Text: "wrote 12 bytes to a.go"},
		{Type: "text", Text: "diagnostics (go): 2 new problem(s):\na.go:3:1: x\ndiagnostics (python): 1 new problem(s):\nb.py:1: y"},
	}}
	if n, ok := Diagnostics(res); !ok || n != 3 {
		t.Fatalf("Diagnostics = %d, %v; want 3, true", n, ok)
	}
	clean := tools.Result{Content: []tools.Block{{Type: "text", Text: "ok"}, {Type: "text", Text: "diagnostics (go): no new problems"}}}
	if n, ok := Diagnostics(clean); !ok || n != 0 {
		t.Fatalf("clean = %d, %v; want 0, true", n, ok)
	}
	if _, ok := Diagnostics(tools.Text("wrote a.txt")); ok {
		t.Fatal("a write without the hook's report counts as reported")
	}
}
