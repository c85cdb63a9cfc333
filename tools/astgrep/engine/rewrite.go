package engine

import (
	"bytes"
	"sort"
	"strings"
)

// Edit replaces the bytes [Start, End) of a file with Text.
type Edit struct {
	Start, End uint32
	Text       string
}

// TemplateVars lists the metavariables a rewrite template refers to.
func TemplateVars(template string) []string {
	var out []string
	for _, m := range metaRe.FindAllString(template, -1) {
		out = append(out, strings.TrimLeft(m, "$"))
	}
	return out
}

// PlanEdits turns matches into edits: where matches overlap, the outermost
// wins and the ones inside it are dropped, in document order.
func PlanEdits(src []byte, ms []Match, template string) []Edit {
	sorted := append([]Match(nil), ms...)
	sort.SliceStable(sorted, func(a, b int) bool {
		if sorted[a].Start != sorted[b].Start {
			return sorted[a].Start < sorted[b].Start
		}
		return sorted[a].End > sorted[b].End
	})
	var out []Edit
	var end uint32
	for i, m := range sorted {
		if i > 0 && m.Start < end {
			continue
		}
		out = append(out, Edit{Start: m.Start, End: m.End, Text: Expand(src, m, template)})
		end = m.End
	}
	return out
}

// ApplyEdits applies non-overlapping edits sorted by position.
func ApplyEdits(src []byte, edits []Edit) []byte {
	var b strings.Builder
	b.Grow(len(src))
	var at uint32
	for _, e := range edits {
		b.Write(src[at:e.Start])
		b.WriteString(e.Text)
		at = e.End
	}
	b.Write(src[at:])
	return []byte(b.String())
}

// Expand fills template with m's captures. A capture that spans lines is
// re-indented: its later lines lose the indentation of the line it came
// from and take that of the template line it lands on; the result's later
// lines then take the indentation of the line the match starts on. A
// capture line whose indentation does not begin with that of the line it
// came from (spaces in a tab-indented file) cannot be shifted by the same
// amount: where the capture lands at the indentation it came from, it is
// kept byte for byte, else it takes the new indentation for the old.
func Expand(src []byte, m Match, template string) string {
	caps := map[string]Capture{}
	for _, c := range m.Captures {
		caps[c.Name] = c
	}
	base := indentAt(src, m.Start)
	// Lines of the result that are final (a capture's lines): the match's
	// indentation is not added to them again.
	var b strings.Builder
	var final []bool // per line of b after the first
	last := 0
	write := func(s string, isFinal bool) {
		for i, part := range strings.Split(s, "\n") {
			if i > 0 {
				b.WriteByte('\n')
				final = append(final, isFinal)
			}
			b.WriteString(part)
		}
	}
	for _, loc := range metaRe.FindAllStringIndex(template, -1) {
		write(template[last:loc[0]], false)
		last = loc[1]
		name := strings.TrimLeft(template[loc[0]:loc[1]], "$")
		c, ok := caps[name]
		if !ok {
			continue // an unbound name (an empty run) expands to nothing
		}
		if !strings.Contains(c.Text, "\n") {
			write(c.Text, false)
			continue
		}
		from := indentAt(src, c.Start)
		// Where the capture's later lines go: the template line's
		// indentation after the match's own.
		landing := base + leadingSpace(currentLine(b.String()))
		lines := strings.Split(c.Text, "\n")
		for i := 1; i < len(lines); i++ {
			switch line := lines[i]; {
			case strings.TrimSpace(line) == "":
				lines[i] = ""
			case strings.HasPrefix(line, from):
				lines[i] = landing + line[len(from):]
			case landing == from:
				// Not moved: byte for byte.
			default:
				lines[i] = landing + strings.TrimLeft(line, " \t")
			}
		}
		write(strings.Join(lines, "\n"), true)
	}
	write(template[last:], false)
	out := b.String()
	if base == "" || len(final) == 0 {
		return out
	}
	lines := strings.Split(out, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" && !final[i-1] {
			lines[i] = base + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// indentAt is the leading whitespace of the line holding byte off.
func indentAt(src []byte, off uint32) string {
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	return leadingSpace(string(src[start:off]))
}

func currentLine(s string) string { return s[strings.LastIndexByte(s, '\n')+1:] }

func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t"))]
}
