package bench

import (
	"strings"
	"testing"
	"time"
)

func TestBackendReportMarksTargetsFromFigures(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		var s []time.Duration
		for _, x := range v {
			s = append(s, time.Duration(x*float64(time.Millisecond)))
		}
		return s
	}
	r := BackendReport{Backend: "containerd", Title: "containerd next to Docker", Setting: "containerd 1.7",
		FreshWhat: "attach, handshake, read, close", PipeTarget: "pipe within 1 ms", FreshTarget: "20x", How: "`go run ./cmd/containerdbench`",
		Creates: 1, Calls: 3, Fresh: 2}
	got := map[string]*BackendFigures{
		"docker":     {Create: ms(200), Pipe: ms(0.5, 0.5, 0.6), Fresh: ms(50, 60)},
		"containerd": {Create: ms(150), Pipe: ms(0.4, 0.4, 0.5), Fresh: ms(5, 6)},
	}
	body := r.Render("2 cores", got)
	for _, want := range []string{"## containerd next to Docker", "| read a 4 KiB file on the open agent pipe | containerd | 3 | 0.400 ms |",
		"| pipe within 1 ms | 0.400 ms vs 0.500 ms (difference 0.100 ms) | **met** |", "| 20x | 12.5x | **NOT met** |",
		"How: `go run ./cmd/containerdbench`; both backends", "1 each; then 3 reads on the open pipe and 2 over fresh execs"} {
		if !strings.Contains(body, want) {
			t.Errorf("section lacks %q:\n%s", want, body)
		}
	}
	// A backend that measured nothing is not met, and does not panic.
	if c := r.Checks(map[string]*BackendFigures{"docker": got["docker"]}); c[0].Met || c[1].Met {
		t.Errorf("checks without figures = %+v", c)
	}
}
