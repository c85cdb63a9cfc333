// Package txtar reads the txtar archives that hold test workspaces (the
// format of golang.org/x/tools/txtar): a comment, then files, each opened
// by a line "-- name --" and running to the next such line.
package txtar

import (
	"fmt"
	"os"
	"strings"
)

// Parse returns the archive's files by name; the leading comment is
// dropped. A name given twice keeps its last contents.
func Parse(data string) map[string]string {
	out := map[string]string{}
	cur := ""
	var b strings.Builder
	flush := func() {
		if cur != "" {
			out[cur] = b.String()
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		if name, ok := marker(line); ok {
			flush()
			cur = name
			continue
		}
		if cur != "" {
			b.WriteString(line)
		}
	}
	flush()
	return out
}

// ReadFile parses the archive in file.
func ReadFile(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the txtar archive: %w", err)
	}
	return Parse(string(data)), nil
}

// marker reports whether line opens a file, and its name.
func marker(line string) (string, bool) {
	trim := strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(trim, "-- ") || !strings.HasSuffix(trim, " --") || len(trim) <= 6 {
		return "", false
	}
	name := strings.TrimSpace(trim[3 : len(trim)-3])
	return name, name != ""
}
