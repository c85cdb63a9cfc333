package lsp

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ledger is a run's record of the diagnostics it has seen, per file and
// key (severity, code, message) with a count. Position is left out on
// purpose: a diagnostic that merely moved is not new, while a second
// identical one raises the count and is.
type ledger struct {
	mu     sync.Mutex // guards counts
	counts map[string]map[diagKey]int
}

type diagKey struct {
	severity int
	code     string
	message  string
}

func newLedger() *ledger { return &ledger{counts: map[string]map[diagKey]int{}} }

func keyOf(d Diagnostic) diagKey {
	return diagKey{severity: d.Severity, code: strings.Trim(string(d.Code), `"`), message: d.Message}
}

// known reports whether the ledger has a baseline for the file.
func (l *ledger) known(file string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.counts[file]
	return ok
}

// seed records a baseline for a file the run has not written yet, so that
// problems it already had are not reported as new.
func (l *ledger) seed(file string, diags []Diagnostic) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.counts[file]; ok {
		return
	}
	l.counts[file] = tally(diags)
}

// update records the file's current diagnostics and returns those that are
// new: for each key, as many as its count rose (the last ones by position,
// since new code is usually what moved the count).
func (l *ledger) update(file string, diags []Diagnostic) []Diagnostic {
	now := tally(diags)
	l.mu.Lock()
	before := l.counts[file]
	l.counts[file] = now
	l.mu.Unlock()
	sorted := append([]Diagnostic(nil), diags...)
	sort.SliceStable(sorted, func(i, j int) bool { return less(sorted[i].Range.Start, sorted[j].Range.Start) })
	rise := map[diagKey]int{}
	for k, n := range now {
		if d := n - before[k]; d > 0 {
			rise[k] = d
		}
	}
	var out []Diagnostic
	for i := len(sorted) - 1; i >= 0; i-- {
		k := keyOf(sorted[i])
		if rise[k] > 0 {
			rise[k]--
			out = append(out, sorted[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return less(out[i].Range.Start, out[j].Range.Start) })
	return out
}

func tally(diags []Diagnostic) map[diagKey]int {
	m := map[diagKey]int{}
	for _, d := range diags {
		m[keyOf(d)]++
	}
	return m
}

func less(a, b Position) bool {
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Character < b.Character
}

// severityName is how a diagnostic's severity reads in output.
func severityName(s int) string {
	switch s {
	case SeverityError:
		return "error"
	case SeverityWarning:
		return "warning"
	case SeverityInformation:
		return "info"
	case SeverityHint:
		return "hint"
	}
	return "error"
}

// formatDiagnostic is one line: "path:line: severity[source code]: message".
func formatDiagnostic(rel string, d Diagnostic) string {
	tag := severityName(d.Severity)
	code := strings.Trim(string(d.Code), `"`)
	switch {
	case d.Source != "" && code != "":
		tag += fmt.Sprintf(" [%s %s]", d.Source, code)
	case d.Source != "":
		tag += fmt.Sprintf(" [%s]", d.Source)
	case code != "":
		tag += fmt.Sprintf(" [%s]", code)
	}
	msg := strings.ReplaceAll(strings.TrimSpace(d.Message), "\n", " ")
	return fmt.Sprintf("%s:%d: %s: %s", rel, d.Range.Start.Line+1, tag, msg)
}

// ledgers are per run and freed when the run ends.
func (m *Manager) ledger(runID string) *ledger {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ledgers[runID]
	if l == nil {
		l = newLedger()
		m.ledgers[runID] = l
	}
	return l
}

// RunEnded frees the run's ledger.
func (m *Manager) RunEnded(runID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ledgers, runID)
}
