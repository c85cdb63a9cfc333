package callrec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/tools"
)

// MaxArgs caps a call's argument summary, in characters.
const MaxArgs = 120

// sizeOnly are arguments that carry file text: a summary gives only their
// size, since a file's content may hold anything (keys, tokens).
var sizeOnly = map[string]bool{
	"content": true, "old": true, "new": true, "patch": true,
	"data": true, "input": true, "stdin": true,
}

// headOnly are arguments shown by the start of their first line: enough
// to tell one eval cell or prompt from another, never the whole of it.
var headOnly = map[string]int{"code": 40, "prompt": 40, "question": 60, "context": 30}

// maxString caps any other string argument.
const maxString = 60

// Summarize is the short form of a call's arguments: key=value pairs in
// the order they were sent, file text as its size, code as the start of
// its first line, the environment as its names, all within MaxArgs.
func Summarize(args json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return cut(string(bytes.TrimSpace(args)), MaxArgs)
	}
	var parts []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		parts = append(parts, key+"="+value(key, raw))
		if n := len(strings.Join(parts, " ")); n > 4*MaxArgs {
			break // the rest cannot show anyway
		}
	}
	return cut(strings.Join(parts, " "), MaxArgs)
}

func value(key string, raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch {
		case sizeOnly[key]:
			return "<" + size(len(s)) + ">"
		case headOnly[key] > 0:
			line, _, more := strings.Cut(s, "\n")
			out := strconv.Quote(cut(line, headOnly[key]))
			if more {
				out += fmt.Sprintf("+%d lines", strings.Count(s, "\n"))
			}
			return out
		}
		return strconv.Quote(cut(s, maxString))
	}
	if key == "env" {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			names := make([]string, 0, len(m))
			for k := range m {
				names = append(names, k)
			}
			sort.Strings(names)
			return "{" + strings.Join(names, ",") + "}"
		}
	}
	if sizeOnly[key] {
		return "<" + size(len(raw)) + ">"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return "?"
	}
	return cut(buf.String(), maxString)
}

func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// cut shortens s to at most n characters, marking the cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// newProblems matches the diagnostics-on-write hook's report of one
// language server (tools/lsp onwrite.go): "diagnostics (go): 2 new
// problem(s)" or "diagnostics (go): no new problems".
var newProblems = regexp.MustCompile(`(?m)^diagnostics \([^)]*\): (?:(\d+) new problem|(no) new problems)`)

// Diagnostics is how many new problems the diagnostics-on-write hook
// reported in res, and false when it reported nothing (no hook, no server
// for the language, or a call that wrote nothing). The result carries only
// the hook's text, so this reads the count from it.
func Diagnostics(res tools.Result) (int, bool) {
	n, found := 0, false
	for _, b := range res.Content {
		if b.Type != "text" || !strings.Contains(b.Text, "diagnostics (") {
			continue
		}
		for _, m := range newProblems.FindAllStringSubmatch(b.Text, -1) {
			found = true
			if m[1] != "" {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
		}
	}
	return n, found
}
