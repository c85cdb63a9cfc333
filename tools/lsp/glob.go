package lsp

import (
	"encoding/json"
	"regexp"
	"strings"
)

// fileWatcher is one watcher a server registered for
// workspace/didChangeWatchedFiles: a glob, relative to base when base is
// set, and the kinds of change it wants.
type fileWatcher struct {
	base string // absolute directory of a relative pattern; "" for a plain glob
	abs  bool   // a plain glob that is itself an absolute path
	re   *regexp.Regexp
	kind int // LSP WatchKind bits: 1 create, 2 change, 4 delete
}

// Watch kinds, as LSP numbers them.
const (
	watchCreate = 1
	watchChange = 2
	watchDelete = 4
)

// parseWatchers reads a registration's registerOptions; watchers whose
// pattern cannot be read are left out.
func parseWatchers(raw json.RawMessage) []fileWatcher {
	var opts struct {
		Watchers []struct {
			GlobPattern json.RawMessage `json:"globPattern"`
			Kind        *int            `json:"kind"`
		} `json:"watchers"`
	}
	if json.Unmarshal(raw, &opts) != nil {
		return nil
	}
	var out []fileWatcher
	for _, w := range opts.Watchers {
		fw := fileWatcher{kind: watchCreate | watchChange | watchDelete}
		if w.Kind != nil {
			fw.kind = *w.Kind
		}
		var pattern string
		if json.Unmarshal(w.GlobPattern, &pattern) != nil {
			var rel struct {
				BaseURI json.RawMessage `json:"baseUri"`
				Pattern string          `json:"pattern"`
			}
			if json.Unmarshal(w.GlobPattern, &rel) != nil {
				continue
			}
			var base string
			if json.Unmarshal(rel.BaseURI, &base) != nil {
				var folder struct {
					URI string `json:"uri"`
				}
				if json.Unmarshal(rel.BaseURI, &folder) != nil {
					continue
				}
				base = folder.URI
			}
			fw.base = strings.TrimRight(uriPath(base), "/")
			if fw.base == "" {
				fw.base = "/"
			}
			pattern = rel.Pattern
		}
		if strings.HasPrefix(pattern, "file://") {
			pattern = uriPath(pattern)
		}
		fw.abs = fw.base == "" && strings.HasPrefix(pattern, "/")
		re, err := regexp.Compile("^" + lspGlob(strings.TrimPrefix(pattern, "/")) + "$")
		if err != nil {
			continue
		}
		fw.re = re
		out = append(out, fw)
	}
	return out
}

// matches reports whether the watcher wants a change of kind (1 created,
// 2 changed, 3 deleted) to file; root is the server's root, against which
// a plain relative glob is also tried.
func (w fileWatcher) matches(file, root string, kind int) bool {
	bit := map[int]int{1: watchCreate, 2: watchChange, 3: watchDelete}[kind]
	if w.kind&bit == 0 {
		return false
	}
	switch {
	case w.base != "":
		if !within(w.base, file) || file == w.base {
			return false
		}
		return w.re.MatchString(strings.TrimPrefix(file[len(w.base):], "/"))
	case w.abs:
		return w.re.MatchString(strings.TrimPrefix(file, "/"))
	}
	if within(root, file) && file != root && w.re.MatchString(strings.TrimPrefix(file[len(root):], "/")) {
		return true
	}
	return w.re.MatchString(strings.TrimPrefix(file, "/"))
}

// lspGlob translates LSP's glob syntax (*, ?, **, {a,b}, [a-z], [!a])
// to a regular expression.
func lspGlob(g string) string {
	var b strings.Builder
	depth := 0 // open {} groups
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/") && (i == 0 || g[i-1] == '/' || g[i-1] == '{' || g[i-1] == ','):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '{':
			depth++
			b.WriteString("(?:")
		case c == '}' && depth > 0:
			depth--
			b.WriteString(")")
		case c == ',' && depth > 0:
			b.WriteString("|")
		case c == '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	for ; depth > 0; depth-- {
		b.WriteString(")")
	}
	return b.String()
}
