package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// The differential test runs the same patterns through this engine and the
// ast-grep CLI over large trees no one here wrote (the Go toolchain's src/
// and Python's standard library) and requires the same matches, file by
// file: (file, start byte, matched text).

// diffCase is one pattern; where ast-grep knowingly differs, known names
// the difference and check asserts our documented behaviour instead.
type diffCase struct {
	pattern string
	// extra, when set, names a documented difference: beyond ast-grep's
	// matches (which must all be among ours) we also report the hits it
	// accepts.
	extra   string
	allowed func(h hit) bool
	// peer, when set, is the ast-grep rule (YAML under `rule:`) that says
	// what the pattern means, for fragments ast-grep's plain pattern reads
	// in a context that cannot hold them.
	peer string
}

// commentMarkers: a match with a comment between its tokens is ours alone
// (DESIGN.md: a pattern matches "whether spaced, wrapped or interleaved
// with a comment"); ast-grep's smart strictness does not pass over comments.
var commentMarkers = map[string][]string{"go": {"//", "/*"}, "python": {"#"},
	"c": {"//", "/*"}, "cpp": {"//", "/*"}, "java": {"//", "/*"}, "rust": {"//", "/*"},
	"javascript": {"//", "/*"}, "typescript": {"//", "/*"}, "tsx": {"//", "/*"}}

// knownMisses are ast-grep matches we do not report, each with its reason.
var knownMisses = map[string]string{
	"if $V, ok := $M[$K]; ok { $$$ }\x00cmd/api/main_test.go": "tree-sitter-go v0.23.4 reads `w.importMap[fromDir][fromPath]` as a generic type instantiation; ast-grep bundles another Go grammar version",
}

// bareReturn: our $$$ may be empty at the end of a child list (a bare
// `return` matches `return $$$`); ast-grep requires at least one node there.
func bareReturn(h hit) bool { return regexp.MustCompile(`return\s*}$`).MatchString(h.text) }

func always(hit) bool { return true }

// sameText: a repeated metavariable must capture the same tokens; ast-grep
// also wants the same node kinds, so `r.f = append(r.f, x)` (an
// expression list on the left, a selector inside the call) is ours alone.
func sameText(h hit) bool {
	flat := strings.Join(strings.Fields(h.text), "")
	lhs, rest, ok := strings.Cut(flat, "=append(")
	return ok && (strings.HasPrefix(rest, lhs+",") || strings.HasPrefix(rest, lhs+")"))
}

var goCases = []diffCase{
	{pattern: `fmt.Errorf($A, $$$)`},
	{pattern: `if err != nil { return $$$ }`, extra: "an empty trailing $$$ matches a bare return", allowed: bareReturn},
	{pattern: `fmt.Sprintf($F, $$$)`},
	{pattern: `errors.New($MSG)`, extra: "the ladder reads the fragment in a function body, as the call; ast-grep reads it at the top level, as a type conversion, and finds nothing", allowed: always},
	{pattern: `$X == nil`},
	{pattern: `len($A) == 0`},
	{pattern: `for $K, $V := range $M { $$$ }`},
	{pattern: `defer $F.Close()`},
	{pattern: `$A = append($A, $$$)`, extra: "repeated metavariables compare tokens, not node kinds", allowed: sameText},
	{pattern: `make([]$T, 0, $N)`},
	{pattern: `go func() { $$$ }()`},
	{pattern: `strings.HasPrefix($S, $P)`},
	{pattern: `panic($$$)`},
	{pattern: `$X.($T)`},
	{pattern: `return nil, $ERR`},
	{pattern: `$M.Lock()`},
	{pattern: `func ($R $T) String() string { $$$ }`},
	{pattern: `t.Fatalf($F, $$$)`},
	{pattern: `if $V, ok := $M[$K]; ok { $$$ }`},
	{pattern: `var $X $T`},
	{pattern: `$A.$B($C, $$$ARGS)`},
}

var pyCases = []diffCase{
	{pattern: `print($$$)`},
	{pattern: `isinstance($X, $T)`},
	{pattern: `raise $E($$$)`},
	{pattern: `self.$A = $A`},
	{pattern: `len($X) == 0`},
	{pattern: `import $M`},
	{pattern: `$A.append($B)`},
	{pattern: `lambda $$$: $B`},
	{pattern: `[$X for $Y in $Z]`},
	{pattern: `assert $X, $$$`},
	{pattern: `return None`},
	{pattern: `os.path.join($$$)`},
	{pattern: `if __name__ == "__main__": $$$`},
	{pattern: `$X if $C else $Y`},
}

// astGrepBin finds the pinned CLI that scripts/install-ast-grep.sh installs.
func astGrepBin(t testing.TB) string {
	if p := os.Getenv("AST_GREP_BIN"); p != "" {
		return p
	}
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".tools", "ast-grep", "node_modules", ".bin", "ast-grep")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if p, err := exec.LookPath("ast-grep"); err == nil {
		return p
	}
	t.Skip("the ast-grep CLI is not installed: run scripts/install-ast-grep.sh (or set AST_GREP_BIN)")
	return ""
}

type hit struct {
	start uint32
	text  string
}

// peerHits runs every pattern in one ast-grep scan and returns, per
// pattern, the hits per file (relative path).
func peerHits(t testing.TB, bin, lang, root string, cases []diffCase) []map[string][]hit {
	var rules strings.Builder
	for i, c := range cases {
		if i > 0 {
			rules.WriteString("---\n")
		}
		rule := c.peer
		if rule == "" {
			q, _ := json.Marshal(c.pattern)
			rule = "pattern: " + string(q)
		}
		fmt.Fprintf(&rules, "id: p%d\nlanguage: %s\nrule:\n%s\n", i, lang, indent(rule, "  "))
	}
	cmd := exec.Command(bin, "scan", "--inline-rules", rules.String(), "--json=stream", "--globs", "!site-packages", root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res := make([]map[string][]hit, len(cases))
	for i := range res {
		res[i] = map[string][]hit{}
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r struct {
			Text  string `json:"text"`
			File  string `json:"file"`
			Rule  string `json:"ruleId"`
			Range struct {
				Byte struct{ Start uint32 } `json:"byteOffset"`
			} `json:"range"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("ast-grep output: %v", err)
		}
		var k int
		fmt.Sscanf(r.Rule, "p%d", &k)
		rel, _ := filepath.Rel(root, r.File)
		res[k][filepath.ToSlash(rel)] = append(res[k][filepath.ToSlash(rel)], hit{r.Range.Byte.Start, r.Text})
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ast-grep scan: %v: %s", err, stderr.String())
	}
	return res
}

// ourHits parses every file once and runs every pattern on it.
// ourHits also returns the listed files and, among them, those that do not
// parse cleanly (see recovered) or are not UTF-8, which compareHits
// leaves out.
func ourHits(t testing.TB, l *Language, root string, skip []string, cases []diffCase) ([]map[string][]hit, map[string]bool, map[string]bool) {
	ctx := context.Background()
	pats := make([]*Pattern, len(cases))
	for i, c := range cases {
		p, err := Compile(ctx, l, c.pattern)
		if err != nil {
			t.Errorf("compile %q: %v", c.pattern, err)
			continue
		}
		pats[i] = p
	}
	d := Dir{Root: root, Skip: skip}
	files, err := d.List(l, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, f := range files {
		listed[f.Path] = true
	}
	res := make([]map[string][]hit, len(cases))
	for i := range res {
		res[i] = map[string][]hit{}
	}
	unclean := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ch := make(chan FileKey)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, err := newParser(l)
			if err != nil {
				t.Error(err)
				return
			}
			defer pr.Close()
			for f := range ch {
				src, err := os.ReadFile(filepath.Join(root, f.Path))
				if err != nil || binary(src) {
					continue
				}
				tr, err := pr.parse(ctx, src)
				if err != nil {
					t.Error(err)
					continue
				}
				if recovered(l, tr) || !utf8.Valid(src) {
					mu.Lock()
					unclean[f.Path] = true
					mu.Unlock()
				}
				for i, p := range pats {
					if p == nil || !p.mayMatch(src) {
						continue
					}
					ms := p.FindAll(tr)
					if len(ms) == 0 {
						continue
					}
					hs := make([]hit, len(ms))
					for j, m := range ms {
						hs[j] = hit{m.Start, m.Text}
					}
					mu.Lock()
					res[i][f.Path] = hs
					mu.Unlock()
				}
			}
		}()
	}
	for _, f := range files {
		ch <- f
	}
	close(ch)
	wg.Wait()
	return res, listed, unclean
}

// recovered reports a parse that recovered from a syntax error (an ERROR
// node, or a node the parser made up), where grammar versions may differ.
// An anonymous bit-field (`__u32 :24;`, valid C) is no error: the C and
// C++ grammars read it with a made-up field name, as ast-grep's do, and
// its file is compared.
func recovered(l *Language, t *Tree) bool {
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.flags&flagError != 0 {
			return true
		}
		if n.flags&flagMissing == 0 {
			continue
		}
		if n.named() && l.ts.NodeKindForId(n.kind) == "field_identifier" && n.next >= 0 &&
			l.ts.NodeKindForId(t.nodes[n.next].kind) == "bitfield_clause" {
			continue
		}
		return true
	}
	return false
}

// compareHits reports every unexplained difference and returns how many
// cases had none.
func compareHits(t *testing.T, lang string, cases []diffCase, ours, peer []map[string][]hit, listed, unclean map[string]bool) int {
	markers := commentMarkers[lang]
	agreed := 0
	for i, c := range cases {
		total, same, extras, skipped, mine := 0, 0, 0, 0, 0
		var report []string
		files := map[string]bool{}
		for f := range ours[i] {
			files[f] = true
		}
		for f := range peer[i] {
			if listed[f] { // files over our size cap are not searched
				files[f] = true
			}
		}
		names := make([]string, 0, len(files))
		for f := range files {
			names = append(names, f)
		}
		sort.Strings(names)
		for _, f := range names {
			a, b := ours[i][f], peer[i][f]
			sort.Slice(b, func(x, y int) bool { return b[x].start < b[y].start })
			if unclean[f] {
				skipped++
				continue
			}
			total += len(b)
			mine += len(a)
			if fmt.Sprint(a) == fmt.Sprint(b) {
				same++
				continue
			}
			have := map[hit]bool{}
			for _, h := range a {
				have[h] = true
			}
			theirs := map[hit]bool{}
			for _, h := range b {
				theirs[h] = true
				if !have[h] {
					if why, ok := knownMisses[c.pattern+"\x00"+f]; ok {
						t.Logf("%s %q: %s: known miss: %s", lang, c.pattern, f, why)
						continue
					}
					report = append(report, fmt.Sprintf("  %s: ast-grep matches at byte %d %q, we do not", f, h.start, clip(h.text)))
				}
			}
			for _, h := range a {
				if theirs[h] {
					continue
				}
				switch {
				case hasAny(h.text, markers):
					extras++
				case c.allowed != nil && c.allowed(h):
					extras++
				default:
					report = append(report, fmt.Sprintf("  %s: we match at byte %d %q, ast-grep does not", f, h.start, clip(h.text)))
				}
			}
		}
		if len(report) > 0 {
			if len(report) > 8 {
				report = append(report[:8], fmt.Sprintf("  ... and %d more", len(report)-8))
			}
			t.Errorf("%s %q differs from ast-grep:\n%s", lang, c.pattern, strings.Join(report, "\n"))
		} else {
			agreed++
		}
		t.Logf("%s %q: %d ast-grep matches in %d files; %d files identical; %d documented extra matches (%s); %d files with syntax errors left out",
			lang, c.pattern, total, len(names)-skipped, same, extras, or(c.extra, "comments between tokens"), skipped)
		if total == 0 && mine == 0 {
			t.Errorf("%s %q: no matches at all: the case tests nothing; pick a pattern that occurs", lang, c.pattern)
		}
	}
	return agreed
}

func hasAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func TestDifferentialGo(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test over GOROOT/src skipped in -short mode")
	}
	bin := astGrepBin(t)
	root := filepath.Join(goRoot(t), "src")
	l, _ := NewRegistry().Lookup("go")
	peer := peerHits(t, bin, "go", root, goCases)
	ours, listed, unclean := ourHits(t, l, root, nil, goCases)
	compareHits(t, "go", goCases, ours, peer, listed, unclean)
}

func TestDifferentialPython(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test over Python's standard library skipped in -short mode")
	}
	bin := astGrepBin(t)
	out, err := exec.Command("python3", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		t.Skipf("python3 is not installed, so there is no standard library to compare on: %v", err)
	}
	root := strings.TrimSpace(string(out))
	l, _ := NewRegistry().Lookup("python")
	peer := peerHits(t, bin, "python", root, pyCases)
	ours, listed, unclean := ourHits(t, l, root, []string{"site-packages"}, pyCases)
	compareHits(t, "python", pyCases, ours, peer, listed, unclean)
}

// goRoot is the Go toolchain's root as the go command on PATH reports it:
// its src/ is the large real tree the Go differential searches.
func goRoot(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Skipf("go env GOROOT did not name the toolchain's root (%v), so there is no Go tree to search", err)
	}
	return strings.TrimSpace(string(out))
}
