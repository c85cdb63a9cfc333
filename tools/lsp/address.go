package lsp

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// target is a symbol resolved to a place on a line.
type target struct {
	line     int // 0-based
	byteCol  int // where the request points: start of the symbol's last identifier
	startCol int // the occurrence's span, in bytes
	endCol   int
}

// splitOrdinal separates "name#2" into ("name", 2); no suffix gives 0.
func splitOrdinal(symbol string) (string, int) {
	i := strings.LastIndexByte(symbol, '#')
	if i <= 0 || i == len(symbol)-1 {
		return symbol, 0
	}
	n, err := strconv.Atoi(symbol[i+1:])
	if err != nil || n <= 0 {
		return symbol, 0
	}
	return symbol[:i], n
}

func isIdentRune(r rune) bool {
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// wholeIdent reports whether s[start:end] is not glued to identifier
// characters on either side.
func wholeIdent(s string, start, end int) bool {
	if start > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:start])
		first, _ := utf8.DecodeRuneInString(s[start:])
		if isIdentRune(r) && isIdentRune(first) {
			return false
		}
	}
	if end < len(s) {
		r, _ := utf8.DecodeRuneInString(s[end:])
		last, _ := utf8.DecodeLastRuneInString(s[:end])
		if isIdentRune(r) && isIdentRune(last) {
			return false
		}
	}
	return true
}

// locate finds symbol (optionally "symbol#N") on 1-based line of doc. Its
// error message is written for the model: it quotes the line when the symbol is
// absent and lists the occurrences when the choice is ambiguous.
func locate(doc *document, file string, line int, symbol string) (target, error) {
	if line < 1 || line > doc.lineCount() {
		return target{}, fmt.Errorf("line %d is out of range: %s has %d lines", line, file, doc.lineCount())
	}
	text := doc.line(line - 1)
	name, nth := splitOrdinal(symbol)
	if strings.TrimSpace(name) == "" {
		return target{}, fmt.Errorf("symbol %q is empty; give a name that appears on line %d", symbol, line)
	}
	var all, whole []int
	for i := 0; i+len(name) <= len(text); {
		j := strings.Index(text[i:], name)
		if j < 0 {
			break
		}
		at := i + j
		all = append(all, at)
		if wholeIdent(text, at, at+len(name)) {
			whole = append(whole, at)
		}
		_, w := utf8.DecodeRuneInString(text[at:])
		i = at + w
	}
	if len(all) == 0 {
		return target{}, fmt.Errorf("symbol %q is not on line %d of %s; the line reads: %s", name, line, file, quoteLine(text))
	}
	cands := all
	if len(whole) > 0 {
		cands = whole
	}
	var at int
	switch {
	case nth > 0 && nth <= len(cands):
		at = cands[nth-1]
	case nth > 0:
		return target{}, fmt.Errorf("symbol %q occurs %d time(s) on line %d of %s, so #%d does not exist; the line reads: %s", name, len(cands), line, file, nth, quoteLine(text))
	case len(cands) == 1:
		at = cands[0]
	default:
		var b strings.Builder
		fmt.Fprintf(&b, "symbol %q occurs %d times on line %d of %s; pick one with %q, %q, ...:", name, len(cands), line, file, name+"#1", name+"#2")
		for i, c := range cands {
			fmt.Fprintf(&b, " #%d: %s", i+1, mark(text, c, c+len(name)))
			if i < len(cands)-1 {
				b.WriteString(";")
			}
		}
		return target{}, fmt.Errorf("%s", b.String())
	}
	return target{line: line - 1, byteCol: at + lastIdent(name), startCol: at, endCol: at + len(name)}, nil
}

// lastIdent is the offset in s of its last identifier ("fmt.Println" ->
// Println, "func Foo" -> Foo): the name a reader means when the symbol text
// carries a qualifier or keyword. Without identifiers it is 0.
func lastIdent(s string) int {
	end := len(s)
	for end > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:end])
		if isIdentRune(r) {
			break
		}
		end -= w
	}
	if end == 0 {
		return 0
	}
	start := end
	for start > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:start])
		if !isIdentRune(r) {
			break
		}
		start -= w
	}
	return start
}

// mark shows the line with one occurrence bracketed, trimmed around it.
func mark(text string, start, end int) string {
	const ctx = 30
	from, to := max(0, start-ctx), min(len(text), end+ctx)
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to++
	}
	s := text[from:start] + "[" + text[start:end] + "]" + text[end:to]
	if from > 0 {
		s = "…" + s
	}
	if to < len(text) {
		s += "…"
	}
	return strings.TrimSpace(s)
}

// quoteLine quotes a source line for an error, cut when very long.
func quoteLine(s string) string {
	const maxLen = 200
	if len(s) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(strings.TrimSpace(s))
}
