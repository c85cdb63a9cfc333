package files

import (
	"fmt"
	"strings"
)

// applyHunks applies a file's hunks to content, in order. Each hunk's old
// lines must match exactly; only its position may differ from what the
// header says, by up to fuzz lines (a bare "@@" hunk is searched for
// anywhere after the previous one). The error's text is written for the
// model.
func applyHunks(name, content string, hunks []*hunk, fuzz int) (string, error) {
	lines := splitKeep(content)
	pos := 0   // hunks apply in order and never overlap
	delta := 0 // current line index minus original line index
	for k, h := range hunks {
		orig := h.oldStart - 1
		if len(h.old) == 0 {
			orig = h.oldStart // "-5,0" inserts after line 5
		}
		orig = max(orig, 0)
		want := orig + delta
		at := -1
		switch {
		case len(h.old) == 0:
			if want >= pos && want <= len(lines) {
				at = want
			}
		case !h.numbered:
			at = search(lines, h.old, pos, len(lines))
		default:
			at = nearest(lines, h.old, want, pos, fuzz)
		}
		if at < 0 {
			return "", hunkFailure(name, k, h, lines, want, pos, fuzz)
		}
		newLines := append([]string(nil), h.new...)
		end := at + len(h.old)
		if end == len(lines) && len(lines) > 0 && !strings.HasSuffix(lines[len(lines)-1], "\n") &&
			allTerminated(h.old) && allTerminated(h.new) && len(h.old) > 0 && len(newLines) > 0 {
			// The file ends without a newline and the patch did not say so
			// (a common omission): keep the file's ending as it was.
			newLines[len(newLines)-1] = strings.TrimSuffix(newLines[len(newLines)-1], "\n")
		}
		if n := len(newLines); n > 0 && !strings.HasSuffix(newLines[n-1], "\n") && end < len(lines) {
			return "", fmt.Errorf("hunk %d of %s (%s) marks its last new line as having no newline at end of file, but more lines follow it; drop the '\\ No newline at end of file' marker", k+1, name, h.header)
		}
		rest := append(newLines, lines[end:]...)
		lines = append(lines[:at], rest...)
		pos = at + len(newLines)
		delta = pos - (orig + len(h.old))
	}
	return strings.Join(lines, ""), nil
}

func allTerminated(lines []string) bool {
	for _, l := range lines {
		if !strings.HasSuffix(l, "\n") {
			return false
		}
	}
	return true
}

// splitKeep splits text into lines that keep their "\n".
func splitKeep(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// matchAt reports whether old matches lines at index at. A hunk line with a
// newline matches the file's last line without one.
func matchAt(lines, old []string, at int) bool {
	if at < 0 || at+len(old) > len(lines) {
		return false
	}
	for j, o := range old {
		l := lines[at+j]
		if l == o {
			continue
		}
		if at+j == len(lines)-1 && !strings.HasSuffix(l, "\n") && o == l+"\n" {
			continue
		}
		return false
	}
	return true
}

// nearest finds old at want, then at want±1, ±2, ... up to fuzz, never
// before lo.
func nearest(lines, old []string, want, lo, fuzz int) int {
	for off := 0; off <= fuzz; off++ {
		if c := want - off; c >= lo && matchAt(lines, old, c) {
			return c
		}
		if c := want + off; off > 0 && c >= lo && matchAt(lines, old, c) {
			return c
		}
	}
	return -1
}

// search finds the first match of old in lines[lo:hi].
func search(lines, old []string, lo, hi int) int {
	for c := lo; c+len(old) <= hi; c++ {
		if matchAt(lines, old, c) {
			return c
		}
	}
	return -1
}

// hunkFailure explains why a hunk did not apply: where its lines are if they
// exist further away, else the first line that differs at the stated place.
func hunkFailure(name string, k int, h *hunk, lines []string, want, pos, fuzz int) error {
	head := fmt.Sprintf("hunk %d of %s (%s) does not apply", k+1, name, h.header)
	if len(h.old) == 0 {
		return fmt.Errorf("%s: it inserts after line %d, but the file has %d lines at that point; fix the line number", head, want, len(lines))
	}
	if elsewhere := search(lines, h.old, 0, len(lines)); elsewhere >= 0 {
		if elsewhere < pos {
			return fmt.Errorf("%s: its lines match at line %d, which an earlier hunk already changed or passed; hunks must be in file order and must not overlap", head, elsewhere+1)
		}
		return fmt.Errorf("%s: its lines match at line %d, more than %d lines from the stated line %d; fix the line numbers in the header", head, elsewhere+1, fuzz, h.oldStart)
	}
	if !h.numbered {
		return fmt.Errorf("%s: its context and removed lines were not found in the file; read the file and copy the lines exactly", head)
	}
	at := max(min(want, len(lines)-1), 0)
	for j, o := range h.old {
		if at+j >= len(lines) {
			return fmt.Errorf("%s: the file ends at line %d, before the hunk's line %q; read the file and make the patch from its current content", head, len(lines), clipText(strings.TrimSuffix(o, "\n"), 80))
		}
		if !matchAt(lines, []string{o}, at+j) {
			return fmt.Errorf("%s: at line %d the file has %q where the hunk expects %q (no match within %d lines either); read the file and make the patch from its current content",
				head, at+j+1, clipText(strings.TrimSuffix(lines[at+j], "\n"), 80), clipText(strings.TrimSuffix(o, "\n"), 80), fuzz)
		}
	}
	return fmt.Errorf("%s: its lines were not found near line %d; read the file and make the patch from its current content", head, h.oldStart)
}
