package bench

import (
	"bytes"
	"fmt"
	"strings"
)

// Content returns exactly size bytes of distinct, numbered text lines of 64
// bytes each (the last one shorter when size is not a multiple of 64), so
// that a reader that skipped, repeated or reordered a line is caught.
func Content(size int) []byte {
	var b bytes.Buffer
	b.Grow(size)
	for i := 1; b.Len() < size; i++ {
		line := fmt.Sprintf("bench line %05d ", i)
		line += strings.Repeat(string(rune('a'+i%26)), 63-len(line)) + "\n"
		b.WriteString(line[:min(len(line), size-b.Len())])
	}
	return b.Bytes()
}

// Lines splits content into its lines without their newlines.
func Lines(content []byte) []string {
	return strings.Split(strings.TrimSuffix(string(content), "\n"), "\n")
}

// CheckNumbered verifies that text (a `read` tool result: numbered lines,
// whatever the numbering looks like) holds every line of want, in order,
// each as the tail of its own line, with nothing left out. It says which
// line is missing, which is what a fast-and-wrong path would show.
func CheckNumbered(text string, want []string) error {
	got := strings.Split(text, "\n")
	j := 0
	for i, w := range want {
		for j < len(got) && !strings.HasSuffix(got[j], w) {
			j++
		}
		if j == len(got) {
			return fmt.Errorf("line %d (%q) is missing from the answer, which begins %q", i+1, w, head(text, 120))
		}
		j++
	}
	if strings.Contains(text, "more lines") {
		return fmt.Errorf("the answer was cut short: it says \"... more lines\"")
	}
	return nil
}

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
