package astgrep

import (
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
)

// unifiedDiff renders the edits of one file as a unified diff with three
// lines of context. The edits say where the text changed, so no general
// diff algorithm is needed: each edit's lines are replaced whole.
func unifiedDiff(name string, src []byte, edits []engine.Edit) string {
	lines := strings.SplitAfter(string(src), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	lineOf := func(off uint32) int { return strings.Count(string(src[:off]), "\n") }
	// Group edits whose context overlaps into one hunk.
	type group struct {
		from, to int // changed lines [from, to)
		edits    []engine.Edit
	}
	var groups []group
	for _, e := range edits {
		from := lineOf(e.Start)
		to := lineOf(e.End) + 1
		if n := len(groups); n > 0 && from <= groups[n-1].to+6 {
			g := &groups[n-1]
			if to > g.to {
				g.to = to
			}
			g.edits = append(g.edits, e)
			continue
		}
		groups = append(groups, group{from: from, to: to, edits: []engine.Edit{e}})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", name, name)
	for _, g := range groups {
		ctxFrom := max(g.from-3, 0)
		ctxTo := min(g.to+3, len(lines))
		// New text of the changed lines: the start of the first line up to
		// the first edit, the edits and the text between them, then the
		// rest of the last line.
		startOff := lineStart(src, g.from)
		endOff := lineStart(src, g.to)
		var mid strings.Builder
		at := uint32(startOff)
		for _, e := range g.edits {
			mid.Write(src[at:e.Start])
			mid.WriteString(e.Text)
			at = e.End
		}
		mid.Write(src[at:endOff])
		newLines := strings.SplitAfter(mid.String(), "\n")
		if newLines[len(newLines)-1] == "" {
			newLines = newLines[:len(newLines)-1]
		}
		oldN := ctxTo - ctxFrom
		newN := (g.from - ctxFrom) + len(newLines) + (ctxTo - g.to)
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", ctxFrom+1, oldN, ctxFrom+1, newN)
		for i := ctxFrom; i < g.from; i++ {
			writeLine(&b, " ", lines[i])
		}
		for i := g.from; i < g.to && i < len(lines); i++ {
			writeLine(&b, "-", lines[i])
		}
		for _, l := range newLines {
			writeLine(&b, "+", l)
		}
		for i := g.to; i < ctxTo; i++ {
			writeLine(&b, " ", lines[i])
		}
	}
	return b.String()
}

func writeLine(b *strings.Builder, prefix, line string) {
	b.WriteString(prefix)
	b.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		b.WriteString("\n\\ No newline at end of file\n")
	}
}

// lineStart is the byte offset where 0-based line n starts (len(src) past
// the end).
func lineStart(src []byte, n int) int {
	if n == 0 {
		return 0
	}
	seen := 0
	for i, c := range src {
		if c == '\n' {
			seen++
			if seen == n {
				return i + 1
			}
		}
	}
	return len(src)
}
