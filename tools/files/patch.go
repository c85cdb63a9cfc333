package files

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// filePatch is one file's part of a unified diff.
type filePatch struct {
	oldPath, newPath string // "" for /dev/null, a/ and b/ prefixes removed
	isNew, isDelete  bool
	rename           bool
	mode             uint32 // from "new file mode", 0 when not given
	hunks            []*hunk
	line             int // patch line where this file starts, for messages
}

// target is the path the file's content ends up at (or is deleted from).
func (f *filePatch) target() string {
	if f.newPath != "" {
		return f.newPath
	}
	return f.oldPath
}

// source is the path whose current content the hunks apply to.
func (f *filePatch) source() string {
	if f.rename || f.newPath == "" {
		return f.oldPath
	}
	return f.newPath
}

// hunk is one @@ section. Lines keep their "\n" unless the patch marked
// them "\ No newline at end of file".
type hunk struct {
	header             string
	numbered           bool // false for a bare "@@" header: position found by search
	oldStart, oldCount int
	newStart, newCount int
	old, new           []string
	added, removed     int // '+' and '-' lines
	line               int
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// patchLines walks the patch text line by line.
type patchLines struct {
	lines []string // with their "\n"
	i     int
}

func (p *patchLines) done() bool { return p.i >= len(p.lines) }

// peek returns the current line without its line ending.
func (p *patchLines) peek() string {
	return strings.TrimRight(strings.TrimSuffix(p.lines[p.i], "\n"), "\r")
}

func (p *patchLines) lineNo() int { return p.i + 1 }

// parsePatch parses a unified diff (git style or plain) into file patches.
// The error's text is written for the model.
func parsePatch(text string) ([]*filePatch, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("the patch is empty; give a unified diff with '--- a/path', '+++ b/path' and '@@ -l,n +l,n @@' hunks")
	}
	p := &patchLines{lines: strings.SplitAfter(text, "\n")}
	if p.lines[len(p.lines)-1] == "" {
		p.lines = p.lines[:len(p.lines)-1]
	}
	var out []*filePatch
	for !p.done() {
		l := p.peek()
		switch {
		case strings.HasPrefix(l, "diff --git "):
			f, err := parseGitFile(p)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		case strings.HasPrefix(l, "--- ") && p.i+1 < len(p.lines) && strings.HasPrefix(p.lines[p.i+1], "+++ "):
			f := &filePatch{line: p.lineNo()}
			if err := parseFileHeaders(p, f, false); err != nil {
				return nil, err
			}
			if err := parseHunks(p, f); err != nil {
				return nil, err
			}
			out = append(out, f)
		case strings.HasPrefix(l, "@@"):
			return nil, fmt.Errorf("the hunk %q at patch line %d comes before any file header; start each file with '--- a/path' and '+++ b/path' lines", clipText(l, 60), p.lineNo())
		case strings.HasPrefix(l, "*** Begin Patch") || strings.HasPrefix(l, "*** Update File:"):
			return nil, fmt.Errorf("the patch is not a unified diff (it uses '*** Begin Patch' blocks); give '--- a/path', '+++ b/path' and '@@ -l,n +l,n @@' hunks")
		default:
			p.i++ // preamble or trailer text (a commit message, "-- ", a version line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the patch has no file headers; each file needs '--- a/path' and '+++ b/path' lines followed by '@@ -l,n +l,n @@' hunks")
	}
	return out, nil
}

func parseGitFile(p *patchLines) (*filePatch, error) {
	f := &filePatch{line: p.lineNo()}
	head := p.peek()
	a, b, ok := splitGitHeader(strings.TrimPrefix(head, "diff --git "))
	if ok {
		f.oldPath, f.newPath = a, b
	}
	p.i++
	for !p.done() {
		l := p.peek()
		switch {
		case strings.HasPrefix(l, "--- "):
			if err := parseFileHeaders(p, f, true); err != nil {
				return nil, err
			}
			return f, parseHunks(p, f)
		case strings.HasPrefix(l, "diff --git ") || strings.HasPrefix(l, "@@"):
			return f, finishHeaderOnly(f, head, p)
		case strings.HasPrefix(l, "new file mode "):
			f.isNew = true
			if m, err := strconv.ParseUint(strings.TrimPrefix(l, "new file mode "), 8, 32); err == nil {
				f.mode = uint32(m) & 0o777
			}
		case strings.HasPrefix(l, "deleted file mode "):
			f.isDelete = true
		case strings.HasPrefix(l, "rename from "):
			f.rename, f.oldPath = true, unquote(strings.TrimPrefix(l, "rename from "))
		case strings.HasPrefix(l, "rename to "):
			f.rename, f.newPath = true, unquote(strings.TrimPrefix(l, "rename to "))
		case strings.HasPrefix(l, "Binary files ") || l == "GIT binary patch":
			return nil, fmt.Errorf("the patch for %s (patch line %d) is a binary diff, which apply_patch cannot apply; write text files only", f.target(), p.lineNo())
		case strings.HasPrefix(l, "copy from ") || strings.HasPrefix(l, "copy to "):
			return nil, fmt.Errorf("the patch copies a file (patch line %d), which apply_patch does not support; add the copy as a new file from /dev/null", p.lineNo())
		}
		p.i++
	}
	return f, finishHeaderOnly(f, head, p)
}

// finishHeaderOnly completes a git section with no ---/+++ lines: an empty
// new file, a deleted empty file, a pure rename or a mode change.
func finishHeaderOnly(f *filePatch, head string, p *patchLines) error {
	if f.oldPath == "" || f.newPath == "" {
		return fmt.Errorf("cannot read the file names in %q (patch line %d); use 'diff --git a/path b/path'", clipText(head, 80), f.line)
	}
	if f.isNew {
		f.oldPath = ""
	}
	if f.isDelete {
		f.newPath = ""
	}
	return nil
}

// splitGitHeader splits "a/x b/x" (possibly quoted) into x and x.
func splitGitHeader(s string) (string, string, bool) {
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", "", false
		}
		return stripPrefix(unquote(q), "a/"), stripPrefix(unquote(strings.TrimSpace(s[len(q):])), "b/"), true
	}
	// Unquoted names may contain spaces; the two halves are equal for
	// anything but a rename, so try the middle split first.
	if n := len(s); n%2 == 1 && s[n/2] == ' ' && strings.HasPrefix(s, "a/") && strings.HasPrefix(s[n/2+1:], "b/") {
		return s[2 : n/2], s[n/2+3:], true
	}
	i := strings.Index(s, " b/")
	if i < 0 || !strings.HasPrefix(s, "a/") {
		return "", "", false
	}
	return s[2:i], s[i+3:], true
}

// parseFileHeaders reads the "--- old" and "+++ new" lines.
func parseFileHeaders(p *patchLines, f *filePatch, git bool) error {
	oldRaw := strings.TrimPrefix(p.peek(), "--- ")
	p.i++
	if p.done() || !strings.HasPrefix(p.peek(), "+++ ") {
		return fmt.Errorf("the '--- %s' line at patch line %d must be followed by a '+++ b/path' line", clipText(oldRaw, 60), p.i)
	}
	newRaw := strings.TrimPrefix(p.peek(), "+++ ")
	p.i++
	oldName, newName := headerName(oldRaw), headerName(newRaw)
	// Strip a/ and b/ the way git does (-p1): always in a git diff, and in a
	// plain diff when both sides carry them (or the other side is /dev/null).
	strip := git ||
		(strings.HasPrefix(oldName, "a/") || oldName == "/dev/null") &&
			(strings.HasPrefix(newName, "b/") || newName == "/dev/null")
	side := func(name, prefix string) string {
		if name == "/dev/null" {
			return ""
		}
		if strip {
			return stripPrefix(name, prefix)
		}
		return name
	}
	f.oldPath, f.newPath = side(oldName, "a/"), side(newName, "b/")
	if f.oldPath == "" && f.newPath == "" {
		return fmt.Errorf("the file header at patch line %d has /dev/null on both sides; name the file on at least one", f.line)
	}
	f.isNew = f.oldPath == ""
	f.isDelete = f.newPath == ""
	return nil
}

// headerName takes the file name from a ---/+++ line: quoted, or up to a tab
// (after which diff puts a timestamp).
func headerName(s string) string {
	if strings.HasPrefix(s, `"`) {
		if q, err := strconv.QuotedPrefix(s); err == nil {
			return unquote(q)
		}
	}
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, " ")
}

func unquote(s string) string {
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

func stripPrefix(s, prefix string) string { return strings.TrimPrefix(s, prefix) }

func parseHunks(p *patchLines, f *filePatch) error {
	for !p.done() && strings.HasPrefix(p.peek(), "@@") {
		h, err := parseHunk(p, f)
		if err != nil {
			return err
		}
		f.hunks = append(f.hunks, h)
	}
	if len(f.hunks) == 0 && !f.isNew && !f.isDelete && !f.rename {
		return fmt.Errorf("the patch for %s (patch line %d) has no hunks; add '@@ -l,n +l,n @@' sections after its '+++' line", f.target(), f.line)
	}
	return nil
}

func parseHunk(p *patchLines, f *filePatch) (*hunk, error) {
	h := &hunk{header: p.peek(), line: p.lineNo()}
	if m := hunkHeader.FindStringSubmatch(h.header); m != nil {
		h.numbered = true
		h.oldStart, _ = strconv.Atoi(m[1])
		h.oldCount = countOr1(m[2])
		h.newStart, _ = strconv.Atoi(m[3])
		h.newCount = countOr1(m[4])
	} else if bare := h.header == "@@" || strings.HasPrefix(h.header, "@@ ") && !strings.HasPrefix(h.header, "@@ -"); !bare {
		return nil, fmt.Errorf("the hunk header %q at patch line %d is malformed; write it as '@@ -old_line,old_count +new_line,new_count @@'", clipText(h.header, 60), h.line)
	}
	p.i++
	oldLeft, newLeft := h.oldCount, h.newCount
	last := byte(0) // kind of the previous body line, for "\ No newline"
	for !p.done() {
		raw := p.lines[p.i]
		if h.numbered && oldLeft == 0 && newLeft == 0 {
			if strings.HasPrefix(raw, `\`) {
				markNoEOL(h, last)
				p.i++
			}
			break
		}
		if !h.numbered && endsBareHunk(p) {
			break
		}
		kind := byte(' ')
		body := ""
		switch {
		case raw == "\n" || raw == "\r\n" || raw == "":
			body = raw // a context line whose leading space was stripped
		case raw[0] == ' ' || raw[0] == '-' || raw[0] == '+':
			kind, body = raw[0], raw[1:]
		case raw[0] == '\\':
			markNoEOL(h, last)
			p.i++
			continue
		default:
			if h.numbered {
				return nil, fmt.Errorf("patch line %d in hunk %q of %s starts with %q, but hunk lines must start with ' ', '-' or '+'; the header promises %d old and %d new lines and %d and %d are still missing, so fix the counts or the lines",
					p.lineNo(), h.header, f.target(), clipText(strings.TrimRight(raw, "\r\n"), 40), h.oldCount, h.newCount, oldLeft, newLeft)
			}
			return h, bareCheck(h, f)
		}
		if !strings.HasSuffix(body, "\n") {
			body += "\n" // the patch text itself ended without a newline
		}
		switch kind {
		case ' ':
			h.old, h.new = append(h.old, body), append(h.new, body)
			oldLeft--
			newLeft--
		case '-':
			h.old = append(h.old, body)
			h.removed++
			oldLeft--
		case '+':
			h.new = append(h.new, body)
			h.added++
			newLeft--
		}
		last = kind
		if h.numbered && (oldLeft < 0 || newLeft < 0) {
			return nil, fmt.Errorf("hunk %q of %s (patch line %d) has more lines than its header says (%d old, %d new); fix the counts in the header",
				h.header, f.target(), h.line, h.oldCount, h.newCount)
		}
		p.i++
	}
	if h.numbered && (oldLeft > 0 || newLeft > 0) {
		return nil, fmt.Errorf("hunk %q of %s (patch line %d) ends early: its header promises %d old and %d new lines, but %d old and %d new are missing; fix the counts or add the lines",
			h.header, f.target(), h.line, h.oldCount, h.newCount, oldLeft, newLeft)
	}
	if !h.numbered {
		return h, bareCheck(h, f)
	}
	return h, nil
}

// endsBareHunk says whether the current line ends a hunk whose header gave
// no counts: another hunk, another file, or text that is not a hunk line.
func endsBareHunk(p *patchLines) bool {
	l := p.lines[p.i]
	return strings.HasPrefix(l, "@@") || strings.HasPrefix(l, "diff --git ") ||
		strings.HasPrefix(l, "--- ") && p.i+1 < len(p.lines) && strings.HasPrefix(p.lines[p.i+1], "+++ ")
}

func bareCheck(h *hunk, f *filePatch) error {
	if len(h.old) == 0 && !f.isNew {
		return fmt.Errorf("hunk %q of %s (patch line %d) has no line numbers and no context or removed lines, so there is no way to tell where it goes; give '@@ -l,n +l,n @@' or some context lines", h.header, f.target(), h.line)
	}
	h.oldCount, h.newCount = len(h.old), len(h.new)
	return nil
}

// markNoEOL applies "\ No newline at end of file" to the previous line.
func markNoEOL(h *hunk, last byte) {
	trim := func(s []string) {
		if n := len(s); n > 0 {
			s[n-1] = strings.TrimSuffix(s[n-1], "\n")
		}
	}
	switch last {
	case '-':
		trim(h.old)
	case '+':
		trim(h.new)
	case ' ':
		trim(h.old)
		trim(h.new)
	}
}

func countOr1(s string) int {
	if s == "" {
		return 1
	}
	n, _ := strconv.Atoi(s)
	return n
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}
