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
// lines then take the indentation of the line the match starts on.
func Expand(src []byte, m Match, template string) string {
	caps := map[string]Capture{}
	for _, c := range m.Captures {
		caps[c.Name] = c
	}
	var b strings.Builder
	last := 0
	for _, loc := range metaRe.FindAllStringIndex(template, -1) {
		b.WriteString(template[last:loc[0]])
		last = loc[1]
		name := strings.TrimLeft(template[loc[0]:loc[1]], "$")
		c, ok := caps[name]
		if !ok {
			continue // an unbound name (an empty run) expands to nothing
		}
		text := c.Text
		if strings.Contains(text, "\n") {
			from := indentAt(src, c.Start)
			landing := leadingSpace(currentLine(b.String()))
			lines := strings.Split(text, "\n")
			for i := 1; i < len(lines); i++ {
				if strings.TrimSpace(lines[i]) == "" {
					lines[i] = ""
					continue
				}
				lines[i] = landing + strings.TrimPrefix(lines[i], from)
			}
			text = strings.Join(lines, "\n")
		}
		b.WriteString(text)
	}
	b.WriteString(template[last:])
	out := b.String()
	base := indentAt(src, m.Start)
	if base == "" || !strings.Contains(out, "\n") {
		return out
	}
	lines := strings.Split(out, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
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
