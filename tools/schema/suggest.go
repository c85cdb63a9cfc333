package schema

import "strings"

// aliases are names models commonly send for an argument under another
// name; each group is matched both ways (for read, "file" means "path";
// for lsp, "path" means "file").
var aliases = [][]string{
	{"path", "file", "filename", "file_path", "filepath", "file_name", "target"},
	{"content", "contents", "text", "body", "data"},
	{"old", "old_string", "old_str", "old_text", "search", "find", "from"},
	{"new", "new_string", "new_str", "new_text", "replace", "replacement", "to"},
	{"command", "cmd", "script"},
	{"timeout_s", "timeout", "timeout_seconds", "timeout_sec", "seconds"},
	{"offset", "start", "start_line", "from_line", "line_offset"},
	{"limit", "count", "max_lines", "num_lines", "lines"},
	{"pattern", "query", "regex"},
	{"patch", "diff"},
	{"code", "source"},
	{"question", "prompt"},
	{"max_results", "limit", "max"},
	{"new_name", "name", "rename_to"},
	{"worker_id", "id", "worker"},
	{"message", "text", "msg"},
	{"brief", "task", "instructions"},
	{"expression", "expr"},
	{"operation", "op", "action"},
}

// suggest returns the declared property that the unknown name most likely
// meant, among candidates (the properties not already given), or "".
// An alias wins, then the same name spelt otherwise (case, '_' or '-'),
// then the nearest by edit distance, within a small budget, to a candidate
// or one of its aliases ("fiel" is a typo of "file", so it means "path").
func suggest(unknown string, candidates []string) string {
	lower := strings.ToLower(unknown)
	for _, g := range aliases {
		if !containsName(g, lower) {
			continue
		}
		for _, c := range candidates {
			if c != lower && containsName(g, c) {
				return c
			}
		}
	}
	norm := squash(lower)
	for _, c := range candidates {
		if squash(c) == norm {
			return c
		}
	}
	best, bestD := "", 0
	for _, c := range candidates {
		for _, name := range namesOf(c) {
			d := distance(norm, squash(name))
			if d <= budget(norm) && (best == "" || d < bestD) {
				best, bestD = c, d
			}
		}
	}
	return best
}

// namesOf is a property's own name followed by its aliases.
func namesOf(prop string) []string {
	names := []string{prop}
	for _, g := range aliases {
		if containsName(g, prop) {
			for _, a := range g {
				if a != prop {
					names = append(names, a)
				}
			}
		}
	}
	return names
}

func containsName(group []string, name string) bool {
	for _, g := range group {
		if g == name {
			return true
		}
	}
	return false
}

// squash drops case and separators: filePath, file_path and file-path
// are the same name.
func squash(s string) string {
	return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(s))
}

// budget is how many edits still read as a typo of a name of this length.
func budget(s string) int {
	switch n := len(s); {
	case n <= 2:
		return 0
	case n <= 5:
		return 1
	default:
		return 2
	}
}

// distance is the optimal-string-alignment edit distance (insertions,
// deletions, substitutions and swaps of neighbours). Names are short and
// capped, so the quadratic table is cheap.
func distance(a, b string) int {
	const maxLen = 64
	if len(a) > maxLen || len(b) > maxLen {
		return maxLen
	}
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
