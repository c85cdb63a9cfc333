package metrics

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// familySources stands in for the families' own counts; tests change it
// between scrapes.
type familySources struct {
	mu        sync.Mutex // guards every field
	kernels   map[string]int
	servers   map[string]int
	restarts  map[string]uint64
	sessions  int
	questions map[string]int
	workers   map[string]int
}

func (f *familySources) wired() wired {
	lock := func() func() { f.mu.Lock(); return f.mu.Unlock }
	return withCollectors(
		Kernels([]string{"python", "javascript"}, func() map[string]int { defer lock()(); return f.kernels }),
		LSP([]string{"go", "python", "typescript"},
			func() map[string]int { defer lock()(); return f.servers },
			func() map[string]uint64 { defer lock()(); return f.restarts }),
		DebugSessions(func() int { defer lock()(); return f.sessions }),
		QuestionsPending(func() map[string]int { defer lock()(); return f.questions }),
		Workers(func() map[string]int { defer lock()(); return f.workers }),
	)
}

var familyNames = []string{"sandboxd_kernels", "sandboxd_lsp_servers", "sandboxd_lsp_restarts_total",
	"sandboxd_debug_sessions", "sandboxd_questions_pending", "sandboxd_workers"}

func TestFamiliesLintClean(t *testing.T) {
	src := &familySources{}
	_, reg := newTest(t, src.wired())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, n := range familyNames {
		if !got[n] {
			t.Errorf("metric %s is missing", n)
		}
	}
}

// Every value of each closed set is exported at zero when nothing exists,
// so dashboards and alerts see 0 rather than no data.
func TestFamiliesZero(t *testing.T) {
	src := &familySources{}
	_, reg := newTest(t, src.wired())
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sandboxd_debug_sessions Debug sessions alive.
# TYPE sandboxd_debug_sessions gauge
sandboxd_debug_sessions 0
# HELP sandboxd_questions_pending Questions and permission requests waiting for an answer, by kind.
# TYPE sandboxd_questions_pending gauge
sandboxd_questions_pending{kind="other"} 0
sandboxd_questions_pending{kind="permission"} 0
sandboxd_questions_pending{kind="question"} 0
# HELP sandboxd_workers Background workers known to sandboxd, by state.
# TYPE sandboxd_workers gauge
sandboxd_workers{state="done"} 0
sandboxd_workers{state="failed"} 0
sandboxd_workers{state="killed"} 0
sandboxd_workers{state="other"} 0
sandboxd_workers{state="running"} 0
`), "sandboxd_debug_sessions", "sandboxd_questions_pending", "sandboxd_workers")
	if err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "sandboxd_kernels"); n != 3 {
		t.Errorf("kernels series = %d, want 3 (python, javascript, other)", n)
	}
	if n := testutil.CollectAndCount(reg, "sandboxd_lsp_servers"); n != 4 {
		t.Errorf("lsp servers series = %d, want 4 (go, python, typescript, other)", n)
	}
}

// Values are read from the owners at scrape time, and a value outside the
// closed set is folded into "other" instead of opening the label.
func TestFamiliesValues(t *testing.T) {
	src := &familySources{
		kernels:   map[string]int{"python": 2, "javascript": 1},
		servers:   map[string]int{"go": 1, "rust": 2, "zig": 1},
		restarts:  map[string]uint64{"python": 3, "conv-1234": 1},
		sessions:  1,
		questions: map[string]int{"question": 2, "permission": 1},
		workers:   map[string]int{"running": 1, "done": 4},
	}
	_, reg := newTest(t, src.wired())
	want := `
# HELP sandboxd_debug_sessions Debug sessions alive.
# TYPE sandboxd_debug_sessions gauge
sandboxd_debug_sessions 1
# HELP sandboxd_kernels Live eval kernels sandboxd is attached to, by language.
# TYPE sandboxd_kernels gauge
sandboxd_kernels{language="javascript"} 1
sandboxd_kernels{language="other"} 0
sandboxd_kernels{language="python"} 2
# HELP sandboxd_lsp_restarts_total Language servers restarted after a crash, by language.
# TYPE sandboxd_lsp_restarts_total counter
sandboxd_lsp_restarts_total{language="go"} 0
sandboxd_lsp_restarts_total{language="other"} 1
sandboxd_lsp_restarts_total{language="python"} 3
sandboxd_lsp_restarts_total{language="typescript"} 0
# HELP sandboxd_lsp_servers Running language servers by language.
# TYPE sandboxd_lsp_servers gauge
sandboxd_lsp_servers{language="go"} 1
sandboxd_lsp_servers{language="other"} 3
sandboxd_lsp_servers{language="python"} 0
sandboxd_lsp_servers{language="typescript"} 0
# HELP sandboxd_questions_pending Questions and permission requests waiting for an answer, by kind.
# TYPE sandboxd_questions_pending gauge
sandboxd_questions_pending{kind="other"} 0
sandboxd_questions_pending{kind="permission"} 1
sandboxd_questions_pending{kind="question"} 2
# HELP sandboxd_workers Background workers known to sandboxd, by state.
# TYPE sandboxd_workers gauge
sandboxd_workers{state="done"} 4
sandboxd_workers{state="failed"} 0
sandboxd_workers{state="killed"} 0
sandboxd_workers{state="other"} 0
sandboxd_workers{state="running"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), familyNames...); err != nil {
		t.Error(err)
	}

	src.mu.Lock()
	src.sessions = 0
	src.workers = map[string]int{"done": 4, "killed": 1}
	src.mu.Unlock()
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sandboxd_debug_sessions Debug sessions alive.
# TYPE sandboxd_debug_sessions gauge
sandboxd_debug_sessions 0
# HELP sandboxd_workers Background workers known to sandboxd, by state.
# TYPE sandboxd_workers gauge
sandboxd_workers{state="done"} 4
sandboxd_workers{state="failed"} 0
sandboxd_workers{state="killed"} 1
sandboxd_workers{state="other"} 0
sandboxd_workers{state="running"} 0
`), "sandboxd_debug_sessions", "sandboxd_workers")
	if err != nil {
		t.Error(err)
	}
}

// A family that is not configured exports nothing.
func TestFamiliesOmittedWithoutSource(t *testing.T) {
	_, reg := newTest(t)
	for _, n := range familyNames {
		if c := testutil.CollectAndCount(reg, n); c != 0 {
			t.Errorf("%s has %d series without a source", n, c)
		}
	}
}
