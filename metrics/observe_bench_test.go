package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/tools"
)

// labelLookup is how ObserveToolCall worked before the tool series were
// made at start-up: a mutex-guarded set of the tool names seen and a label
// lookup on both vectors per call. It is the baseline of
// BenchmarkObserveToolCall, measured in the same run.
type labelLookup struct {
	calls *prometheus.CounterVec
	dur   *prometheus.HistogramVec
	mu    sync.Mutex // guards names
	names map[string]bool
}

func (l *labelLookup) observe(tool string, level tools.Level, outcome string, d time.Duration) {
	l.mu.Lock()
	if !l.names[tool] && len(l.names) < maxToolLabels && validToolName(tool) {
		l.names[tool] = true
	}
	if !l.names[tool] {
		tool = otherLabel
	}
	l.mu.Unlock()
	lv := string(level)
	if !levels[lv] {
		lv = otherLabel
	}
	if outcomeIndex(outcome) < 0 {
		outcome = otherLabel
	}
	l.calls.WithLabelValues(tool, lv, outcome).Inc()
	l.dur.WithLabelValues(tool, lv).Observe(d.Seconds())
}

// benchSpecs is a registry's worth of tools (sandboxd registers about 20).
var benchSpecs = []tools.Spec{
	{Name: "read", Level: tools.LevelRead}, {Name: "write", Level: tools.LevelWrite}, {Name: "edit", Level: tools.LevelWrite},
	{Name: "apply_patch", Level: tools.LevelWrite}, {Name: "shell", Level: tools.LevelExec}, {Name: "lsp", Level: tools.LevelRead},
	{Name: "lsp_rename", Level: tools.LevelWrite}, {Name: "ast_grep", Level: tools.LevelRead}, {Name: "ast_edit", Level: tools.LevelWrite},
	{Name: "resolve", Level: tools.LevelWrite}, {Name: "debug", Level: tools.LevelExec}, {Name: "eval", Level: tools.LevelExec},
	{Name: "ask_user", Level: tools.LevelRead}, {Name: "vibe_spawn", Level: tools.LevelRead}, {Name: "vibe_send", Level: tools.LevelRead},
	{Name: "vibe_wait", Level: tools.LevelRead}, {Name: "vibe_kill", Level: tools.LevelRead}, {Name: "vibe_list", Level: tools.LevelRead},
}

// BenchmarkObserveToolCall is the cost of recording one call: "series" is
// ObserveToolCall on the series SetTools made, "labels" the per-call label
// lookup it replaced; parallel runs them from every P at once, as
// concurrent conversations do.
//
//	go test -run '^$' -bench ObserveToolCall -benchmem ./metrics
func BenchmarkObserveToolCall(b *testing.B) {
	m, err := New(prometheus.NewRegistry(), WithBackend("docker"))
	if err != nil {
		b.Fatal(err)
	}
	m.SetTools(benchSpecs)
	l := &labelLookup{names: map[string]bool{},
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"tool", "level", "outcome"}),
		dur:   prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "d_seconds", Help: "d", Buckets: prometheus.DefBuckets}, []string{"tool", "level"})}
	impls := []struct {
		name string
		obs  func(string, tools.Level, string, time.Duration)
	}{{"series", m.ObserveToolCall}, {"labels", l.observe}}
	outs := tools.Outcomes()
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				sp := benchSpecs[i%len(benchSpecs)]
				im.obs(sp.Name, sp.Level, outs[i%len(outs)], time.Millisecond)
				i++
			}
		})
		b.Run(im.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					sp := benchSpecs[i%len(benchSpecs)]
					im.obs(sp.Name, sp.Level, outs[i%len(outs)], time.Millisecond)
					i++
				}
			})
		})
	}
}
