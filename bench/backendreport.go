package bench

import (
	"fmt"
	"strings"
	"time"
)

// BackendReport describes a section comparing a backend with the Docker
// backend measured by CompareBackends in the same run: what differs between
// the containerd and the Kubernetes sections is words, not measurement.
type BackendReport struct {
	Backend string // the compared backend's name ("containerd", "kubernetes")
	Title   string // the section's heading, without "## "
	Setting string // what the italic line says after the machine, e.g. "containerd 1.7.24"
	// FreshWhat is the fresh-exec row's wording ("attach, handshake, read, close").
	FreshWhat string
	// PipeTarget and FreshTarget word the two targets.
	PipeTarget, FreshTarget string
	// How opens the How: line (the command and its setting); the counts follow.
	How string
	// After ends the How: line (what a reader needs to read the figures).
	After                 string
	Creates, Calls, Fresh int
}

// Render writes the section: both backends' figures row by row, and the
// issue's targets, each met or not by computation from the figures.
func (r BackendReport) Render(machine string, got map[string]*BackendFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", r.Title)
	fmt.Fprintf(&b, "_Measured %s on %s; %s; load average at the end %s._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine, r.Setting, LoadAverage())
	fmt.Fprintf(&b, "| figure | backend | n | p50 | p90 | p99 | max |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(what, backend string, s []time.Duration) {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", what, backend, len(s),
			Ms(Percentile(s, 50)), Ms(Percentile(s, 90)), Ms(Percentile(s, 99)), Ms(Percentile(s, 100)))
	}
	for _, k := range []struct {
		what string
		pick func(*BackendFigures) []time.Duration
	}{
		{"create until the first agent answer (Manager.Create, pipe attached, one stat)", func(g *BackendFigures) []time.Duration { return g.Create }},
		{"read a 4 KiB file on the open agent pipe", func(g *BackendFigures) []time.Duration { return g.Pipe }},
		{"the same read over a fresh exec (" + r.FreshWhat + ")", func(g *BackendFigures) []time.Duration { return g.Fresh }},
	} {
		for _, name := range []string{"docker", r.Backend} {
			var s []time.Duration
			if g := got[name]; g != nil {
				s = k.pick(g)
			}
			row(k.what, name, s)
		}
	}
	fmt.Fprintf(&b, "\n| target (issue 8) | measured | result |\n| --- | --- | --- |\n")
	for _, c := range r.Checks(got) {
		fmt.Fprintf(&b, "| %s | %s | **%s** |\n", c.Target, c.Got, c.Mark())
	}
	fmt.Fprintf(&b, "\nHow: %s; both backends in one process; creates interleaved (docker, %s, ...), %d each; then %d reads on the open pipe and %d over fresh execs per backend, one sandbox each.",
		r.How, r.Backend, r.Creates, r.Calls, r.Fresh)
	if r.After != "" {
		b.WriteString(" " + r.After)
	}
	b.WriteString("\n")
	return b.String()
}

// Checks computes the two targets: the compared backend's pipe
// within 1 ms of Docker's, and at least 20x faster than a fresh exec.
func (r BackendReport) Checks(got map[string]*BackendFigures) []Check {
	p50 := func(name string, pick func(*BackendFigures) []time.Duration) time.Duration {
		if g := got[name]; g != nil {
			return Percentile(pick(g), 50)
		}
		return 0
	}
	pipe := func(g *BackendFigures) []time.Duration { return g.Pipe }
	dp, bp := p50("docker", pipe), p50(r.Backend, pipe)
	bf := p50(r.Backend, func(g *BackendFigures) []time.Duration { return g.Fresh })
	diff := bp - dp
	if diff < 0 {
		diff = -diff
	}
	return []Check{
		{Target: r.PipeTarget, Got: fmt.Sprintf("%s vs %s (difference %s)", Ms(bp), Ms(dp), Ms(diff)), Met: bp > 0 && dp > 0 && diff < time.Millisecond},
		RatioAtLeast(r.FreshTarget, bf, bp, 20),
	}
}
