package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var reg = NewRegistry()

func lang(t *testing.T, name string) *Language {
	t.Helper()
	l, ok := reg.Lookup(name)
	if !ok {
		t.Fatalf("no grammar %q", name)
	}
	return l
}

// find compiles pattern and returns the matches in src.
func find(t *testing.T, language, pattern, src string) []Match {
	t.Helper()
	l := lang(t, language)
	p, err := Compile(context.Background(), l, pattern)
	if err != nil {
		t.Fatalf("compile %s %q: %v", language, pattern, err)
	}
	pr, err := newParser(l)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	tr, err := pr.parse(context.Background(), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p.FindAll(tr)
}

func texts(ms []Match) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

func capture(m Match, name string) (string, bool) {
	for _, c := range m.Captures {
		if c.Name == name {
			return c.Text, true
		}
	}
	return "", false
}

// The same call pattern finds the call in every shipped grammar, whatever
// context each grammar needs to read the fragment as a call.
func TestLadderFindsTheCallInEveryLanguage(t *testing.T) {
	cases := map[string]string{
		"go":         "package p\nfunc f() { dispose(a) }\n",
		"python":     "def f():\n    dispose(a)\n",
		"javascript": "function f() { dispose(a); }\n",
		"typescript": "function f(): void { dispose(a as any); }\n",
		"tsx":        "const f = () => { dispose(a); return <div/>; };\n",
		"rust":       "fn f() { dispose(a); }\n",
		"java":       "class C { void f() { dispose(a); } }\n",
		"c":          "void f(void) { dispose(a); }\n",
		"cpp":        "void f() { dispose(a); }\n",
		"ruby":       "def f\n  dispose(a)\nend\n",
		"bash":       "f() {\n  dispose a\n}\n",
	}
	for name, src := range cases {
		pattern := "dispose($X)"
		if name == "bash" {
			pattern = "dispose $X"
		}
		ms := find(t, name, pattern, src)
		if len(ms) != 1 {
			t.Errorf("%s: %q found %q in %q, want the one call", name, pattern, texts(ms), src)
			continue
		}
		if x, _ := capture(ms[0], "X"); !strings.HasPrefix(x, "a") {
			t.Errorf("%s: $X = %q, want a", name, x)
		}
	}
}

// At the top level of a Rust or Java file a bare call is not valid (Rust
// reads `dispose(x)` as an ERROR node; Java wants a class), so a parser fed
// the fragment alone fails. The ladder wraps it in a function body and the
// pattern means the call.
func TestLadderWrapsFragmentInStatementContext(t *testing.T) {
	for _, c := range []struct{ lang, src string }{
		{"rust", "fn f() { dispose(x); }\nfn g() { undispose(x); }\n"},
		{"java", "class C { void f() { dispose(x); } void g() { undispose(x); } }"},
	} {
		p, err := Compile(context.Background(), lang(t, c.lang), "dispose(x)")
		if err != nil {
			t.Fatalf("%s: %v", c.lang, err)
		}
		if p.Context != "statement" {
			t.Errorf("%s: context = %q, want statement", c.lang, p.Context)
		}
		if ms := find(t, c.lang, "dispose(x)", c.src); len(ms) != 1 || ms[0].Text != "dispose(x)" {
			t.Errorf("%s: matches %q, want the one call", c.lang, texts(ms))
		}
	}
	// A class member only parses in the class rung.
	p, err := Compile(context.Background(), lang(t, "java"), "public void $M() { $$$ }")
	if err != nil {
		t.Fatal(err)
	}
	if p.Context != "class member" {
		t.Errorf("java method: context = %q, want class member", p.Context)
	}
	if ms := find(t, "java", "public void $M() { $$$ }", "class C { public void run() { go(); } private void x() {} }"); len(ms) != 1 {
		t.Errorf("java method: %q", texts(ms))
	}
}

func TestUnparseablePatternNamesLanguageAndPlace(t *testing.T) {
	_, err := Compile(context.Background(), lang(t, "go"), "func (")
	if err == nil {
		t.Fatal("an unbalanced fragment compiled")
	}
	msg := err.Error()
	for _, want := range []string{"unparseable", "go", "line 1", "statement"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if _, err := Compile(context.Background(), lang(t, "python"), "def f(:\n"); err == nil || !strings.Contains(err.Error(), "python") {
		t.Errorf("python: %v", err)
	}
	if _, err := Compile(context.Background(), lang(t, "go"), "   "); err == nil {
		t.Error("an empty pattern compiled")
	}
}

func TestRepeatedMetavariableMustCaptureSameTokens(t *testing.T) {
	src := "package p\nfunc f() {\n\t_ = x == x\n\t_ = x == y\n\t_ = a.b == a .\n\t\tb\n\t_ = a.b == a./* c */b\n}\n"
	got := texts(find(t, "go", "$A == $A", src))
	want := []string{"x == x", "a.b == a .\n\t\tb", "a.b == a./* c */b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("matches %q, want %q", got, want)
	}
}

func TestEllipsisEmptyAndNonEmpty(t *testing.T) {
	ms := find(t, "go", "f($$$ARGS)", "package p\nvar _ = f()\nvar _ = f(a, b)\nvar _ = f(g(1))\n")
	if len(ms) != 3 {
		t.Fatalf("matches %q, want 3", texts(ms))
	}
	for i, want := range []string{"", "a, b", "g(1)"} {
		if got, ok := capture(ms[i], "ARGS"); !ok || got != want {
			t.Errorf("match %d: $$$ARGS = %q (bound %v), want %q", i, got, ok, want)
		}
	}
	// A run in the middle, and a bare return for a trailing run.
	ms = find(t, "go", "g($A, $$$MID, 9)", "package p\nvar _ = g(1, 9)\nvar _ = g(1, 2, 3, 9)\n")
	if len(ms) != 2 {
		t.Fatalf("middle run: %q", texts(ms))
	}
	if mid, _ := capture(ms[1], "MID"); mid != "2, 3" {
		t.Errorf("$$$MID = %q, want 2, 3", mid)
	}
	ms = find(t, "go", "if err != nil { return $$$ }", "package p\nfunc f() {\n\tif err != nil {\n\t\treturn\n\t}\n\tif err != nil {\n\t\treturn nil, err\n\t}\n\tif err != nil {\n\t\tlog(err)\n\t\treturn\n\t}\n}\n")
	if len(ms) != 2 {
		t.Errorf("return $$$: %q, want the first two ifs", texts(ms))
	}
}

func TestMatchesAcrossLinesAndComments(t *testing.T) {
	src := "package p\nfunc f() {\n\tdispose(\n\t\tx, // the handle\n\t)\n\tdispose( /* inline */ x)\n\tdispose(y)\n}\n"
	ms := find(t, "go", "dispose(x)", src)
	if len(ms) != 2 || ms[0].Line != 3 || ms[1].Line != 6 {
		t.Errorf("matches %v, want lines 3 and 6", ms)
	}
}

func TestNothingInsideStringsOrComments(t *testing.T) {
	src := "package p\n// dispose(x) in a comment\nvar s = \"dispose(x)\"\nvar r = `dispose(x)`\n/* dispose(x) */\nfunc f() { dispose(x) }\n"
	ms := find(t, "go", "dispose(x)", src)
	if len(ms) != 1 || ms[0].Line != 6 {
		t.Errorf("matches %v, want only line 6", ms)
	}
	py := "# dispose(x)\ns = 'dispose(x)'\nd = \"\"\"\ndispose(x)\n\"\"\"\ndispose(x)\n"
	if ms := find(t, "python", "dispose(x)", py); len(ms) != 1 || ms[0].Line != 6 {
		t.Errorf("python matches %v, want only line 6", ms)
	}
}

func TestRewriteReindentsMultiLineCaptures(t *testing.T) {
	src := "package p\n\nfunc f() {\n\tfor _, v := range vs {\n\t\tuse(v)\n\t\tif v {\n\t\t\tmore(v)\n\t\t}\n\t}\n}\n"
	l := lang(t, "go")
	p, err := Compile(context.Background(), l, "for _, $V := range $XS { $$$BODY }")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New().Parse(context.Background(), l, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	edits := PlanEdits(tr.Src, p.FindAll(tr), "for i := range $XS {\n\t$V := $XS[i]\n\t$$$BODY\n}")
	got := string(ApplyEdits(tr.Src, edits))
	want := "package p\n\nfunc f() {\n\tfor i := range vs {\n\t\tv := vs[i]\n\t\tuse(v)\n\t\tif v {\n\t\t\tmore(v)\n\t\t}\n\t}\n}\n"
	if got != want {
		t.Errorf("rewrite:\n%s\nwant:\n%s", got, want)
	}
}

func TestOverlappingMatchesOutermostFirst(t *testing.T) {
	src := "package p\nvar _ = f(f(1))\nvar _ = f(2)\n"
	l := lang(t, "go")
	p, _ := Compile(context.Background(), l, "f($A)")
	tr, _ := New().Parse(context.Background(), l, []byte(src))
	ms := p.FindAll(tr)
	if len(ms) != 3 {
		t.Fatalf("matches %q, want 3 (nested included)", texts(ms))
	}
	got := string(ApplyEdits(tr.Src, PlanEdits(tr.Src, ms, "g($A)")))
	if want := "package p\nvar _ = g(f(1))\nvar _ = g(2)\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// writeTree makes a directory of n Go files, half of them mentioning Errorf.
func writeTree(t *testing.T, n int) string {
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		body := "package p\n\nfunc f() error { return nil }\n"
		if i%2 == 0 {
			body = "package p\n\nimport \"fmt\"\n\nfunc f() error { return fmt.Errorf(\"x %d\", 1) }\n"
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.go", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSearchPrefiltersAndCaches(t *testing.T) {
	dir := writeTree(t, 40)
	e := New(WithWorkers(2))
	d := Dir{Root: dir}
	l := lang(t, "go")
	files, err := d.List(l, 1<<20)
	if err != nil || len(files) != 40 {
		t.Fatalf("listed %d files (%v)", len(files), err)
	}
	ctx := context.Background()
	p, _ := e.Compile(ctx, l, "fmt.Errorf($A, $$$)")
	res, err := e.Search(ctx, p, d, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 20 {
		t.Errorf("%d files with matches, want 20", len(res))
	}
	parsed, read := e.Stats()
	if parsed != 20 || read != 40 {
		t.Errorf("first search parsed %d and read %d files; want 20 parsed (the rest lack Errorf) and 40 read", parsed, read)
	}
	// Again on the unchanged tree: nothing read, nothing parsed.
	if res, _ = e.Search(ctx, p, d, files); len(res) != 20 {
		t.Errorf("second search: %d files", len(res))
	}
	if p2, r2 := e.Stats(); p2 != parsed || r2 != read {
		t.Errorf("repeated search parsed %d and read %d more files, want none", p2-parsed, r2-read)
	}
	// A different pattern reuses the cached trees.
	q, _ := e.Compile(ctx, l, "return $X")
	if _, err := e.Search(ctx, q, d, files); err != nil {
		t.Fatal(err)
	}
	if p3, _ := e.Stats(); p3 != parsed+20 {
		t.Errorf("new pattern parsed %d files; want only the 20 never parsed", p3-parsed)
	}
	// A changed file (new mtime) is read and parsed again; others are not.
	name := filepath.Join(dir, files[0].Path)
	if err := os.Chtimes(name, time.Now().Add(time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	files, _ = d.List(l, 1<<20)
	before, beforeRead := e.Stats()
	if _, err := e.Search(ctx, p, d, files); err != nil {
		t.Fatal(err)
	}
	if p4, r4 := e.Stats(); p4-before > 1 || r4-beforeRead != 1 {
		t.Errorf("after touching one file: parsed %d, read %d; want at most 1 and exactly 1", p4-before, r4-beforeRead)
	}
}

func TestCacheMemoryIsBounded(t *testing.T) {
	dir := writeTree(t, 40)
	e := New(WithTreeCache(4<<10), WithResultCache(4<<10))
	d := Dir{Root: dir}
	l := lang(t, "go")
	files, _ := d.List(l, 1<<20)
	p, _ := e.Compile(context.Background(), l, "return $X")
	if _, err := e.Search(context.Background(), p, d, files); err != nil {
		t.Fatal(err)
	}
	if _, used := e.trees.stats(); used > 4<<10 {
		t.Errorf("tree cache holds %d bytes, bound 4096", used)
	}
	if _, used := e.results.stats(); used > 4<<10 {
		t.Errorf("result cache holds %d bytes, bound 4096", used)
	}
}

// The prefilter may pass files without a match, never drop one with a match.
func TestPrefilterKeepsEveryLayoutOfAMemberAccess(t *testing.T) {
	p, err := Compile(context.Background(), lang(t, "go"), "fmt.Errorf($A, $$$)")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{
		"package p\nvar _ = fmt.Errorf(\"x\", 1)\n",
		"package p\nvar _ = fmt.\n\tErrorf(\"x\", 1)\n",
		"package p\nvar _ = fmt /* c */ .Errorf(\"x\", 1)\n",
		"package p\nvar _ = fmt. // c\n\tErrorf(\"x\", 1)\n",
	} {
		if !p.mayMatch([]byte(src)) {
			t.Errorf("prefilter dropped %q", src)
		}
		if ms := find(t, "go", "fmt.Errorf($A, $$$)", src); len(ms) != 1 {
			t.Errorf("%q: %d matches, want 1", src, len(ms))
		}
	}
	if p.mayMatch([]byte("package p\nimport \"fmt\"\nfunc f(t T) { t.Errorf(\"x\", 1); fmt.Println() }\n")) {
		t.Error("a file with t.Errorf and fmt.Println but no fmt.Errorf passed the prefilter")
	}
}
