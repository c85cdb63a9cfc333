package lsp

import (
	"unicode/utf8"
)

// Position encodings a server may negotiate (LSP 3.17 PositionEncodingKind).
const (
	encUTF8  = "utf-8"
	encUTF16 = "utf-16"
	encUTF32 = "utf-32"
)

// document is a file's text split into lines, the one place where byte
// offsets and server positions are converted.
type document struct {
	text  string
	lines []int // byte offset where each line starts
}

func newDocument(text string) *document {
	d := &document{text: text, lines: []int{0}}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			d.lines = append(d.lines, i+1)
		}
	}
	return d
}

// lineCount is the number of lines as an editor numbers them; a final
// newline does not start a line of its own.
func (d *document) lineCount() int {
	n := len(d.lines)
	if n > 1 && d.lines[n-1] == len(d.text) {
		n--
	}
	return n
}

// line returns line i (0-based) without its line ending, or "" past the end.
func (d *document) line(i int) string {
	if i < 0 || i >= len(d.lines) {
		return ""
	}
	end := len(d.text)
	if i+1 < len(d.lines) {
		end = d.lines[i+1] - 1
	}
	s := d.text[d.lines[i]:end]
	if len(s) > 0 && s[len(s)-1] == '\r' {
		s = s[:len(s)-1]
	}
	return s
}

// position converts a byte offset within line i to a server position.
func (d *document) position(i, byteCol int, enc string) Position {
	return Position{Line: uint32(i), Character: uint32(units(d.line(i)[:byteCol], enc))}
}

// offset converts a server position to a byte offset in the text, clamping
// a character past the end of its line to the line's end (as LSP says).
func (d *document) offset(p Position, enc string) int {
	if int(p.Line) >= len(d.lines) {
		return len(d.text)
	}
	line := d.line(int(p.Line))
	return d.lines[p.Line] + byteCol(line, int(p.Character), enc)
}

// units counts s in the encoding's code units.
func units(s string, enc string) int {
	switch enc {
	case encUTF8:
		return len(s)
	case encUTF32:
		return utf8.RuneCountInString(s)
	}
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// byteCol maps a count of code units in line to a byte offset; a count that
// falls inside a character (half a surrogate pair) rounds to its start.
func byteCol(line string, n int, enc string) int {
	if enc == encUTF8 {
		return min(n, len(line))
	}
	u := 0
	for i, r := range line {
		w := 1
		if enc != encUTF32 && r >= 0x10000 {
			w = 2
		}
		if u+w > n {
			return i
		}
		u += w
	}
	return len(line)
}
