package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The nine-language differential: the same searches and rewrites through
// this engine and the ast-grep CLI over small trees shipped in
// testdata/diff/<language>, written to hold what the patterns are about
// (object literals, readonly members, bit-fields, rescue clauses, private
// final fields, for loops, a node_modules folder no .gitignore excludes).
//
// Where ast-grep's plain pattern reads the fragment in a context that
// cannot hold what it means (`$K: $V` in JavaScript is a label to it, and
// it finds no object property), the case gives peer: the ast-grep rule
// that says what the pattern means, with pattern context and selector;
// our plain pattern must find exactly what that rule finds.

// langDiff is one language's tree, searches and rewrites.
type langDiff struct {
	lang  string // our grammar name and ast-grep's
	dir   string // under testdata/diff
	cases []diffCase
	edits []editCase
}

// editCase is one rewrite; the trees after it must be byte-identical,
// unless differs names why ast-grep's output is not the one to have, and
// want then holds ours, file by file (relative path -> a substring the
// rewritten file must contain).
type editCase struct {
	pattern, rewrite string
	peer             string // an ast-grep rule body, as for diffCase
	differs          string
	want             map[string]string
}

// tsReadonly: ast-grep's plain pattern is a labeled statement to it; the
// fragment is a property signature in an interface or an object type, and
// a field in a class, and we search with both readings.
const tsReadonly = `any:
  - pattern: {context: "interface I { readonly $P: $_ }", selector: property_signature}
  - pattern: {context: "class C { readonly $P: $_ }", selector: public_field_definition}`

// tsMember is the ast-grep rule for a class member pattern, which its
// plain pattern cannot parse alone.
func tsMember(member, kind string) string {
	return fmt.Sprintf("pattern: {context: %s, selector: %s}", yamlQuote("class A { "+member+" }"), kind)
}

var langDiffs = []langDiff{
	{lang: "javascript", dir: "javascript", cases: []diffCase{
		{pattern: `$K: $V`, peer: `pattern: {context: "({ $K: $V })", selector: pair}`},
		{pattern: `console.log($$$)`},
		{pattern: `require($M)`},
		{pattern: `throw new Error($MSG)`},
		{pattern: `this.$P = $V`},
		{pattern: `if (!$X) { $$$ }`},
		{pattern: `function $F($$$A) { $$$B }`},
	}, edits: []editCase{
		{pattern: `console.log($$$A)`, rewrite: `logger.info($$$A)`},
		{pattern: `throw new Error($M)`, rewrite: `throw new ConfigError($M)`},
		{pattern: `if ($A < $B) { $$$BODY }`, rewrite: "if ($B > $A) {\n  $$$BODY\n}"},
	}},
	{lang: "typescript", dir: "typescript", cases: []diffCase{
		{pattern: `readonly $P: $_`, peer: tsReadonly},
		{pattern: `export declare function $F($$$): $R;`},
		{pattern: `export interface $I { $$$ }`},
		{pattern: `export type $N = $T;`},
		{pattern: `export declare const $N: $T;`},
		// A member pattern keeps its modifier: members without it (or
		// with another) are no match.
		{pattern: `private $F = $V`, peer: tsMember("private $F = $V", "public_field_definition")},
		{pattern: `static $X = $Y`, peer: tsMember("static $X = $Y", "public_field_definition")},
		{pattern: `private $M($$$A) { $$$B }`, peer: tsMember("private $M($$$A) { $$$B }", "method_definition")},
		{pattern: `class $C { private $F = $V }`},
		// A member written with its `;` is the member: in a class body the
		// `;` is a token of the body, not the field's.
		{pattern: `private $F: $T;`, peer: tsMember("private $F: $T;", "public_field_definition")},
		{pattern: `static $X = $Y;`, peer: tsMember("static $X = $Y;", "public_field_definition")},
		{pattern: `protected abstract $M($$$A): $R;`, peer: tsMember("protected abstract $M($$$A): $R;", "abstract_method_signature")},
	}, edits: []editCase{
		{pattern: `export declare function $F($$$A): $R;`, rewrite: `export function $F($$$A): $R;`},
		{pattern: `readonly $P: $T`, rewrite: `$P: $T`, peer: strings.ReplaceAll(tsReadonly, "$_", "$T")},
	}},
	{lang: "tsx", dir: "tsx", cases: []diffCase{
		{pattern: `readonly $P: $_`, peer: tsReadonly},
		{pattern: `useEffect($F, [$$$D])`},
		{pattern: `useState<$T>($I)`},
		{pattern: `console.log($$$)`},
		{pattern: `<Button $$$P />`},
		// In TypeScript the fragment is also a member of an object type or
		// an interface; ast-grep needs a rule per reading.
		{pattern: `$K: $V`, peer: `any:
  - pattern: {context: "({ $K: $V })", selector: pair}
  - pattern: {context: "interface I { $K: $V }", selector: property_signature}`},
	}, edits: []editCase{
		{pattern: `useEffect($F, [$$$D])`, rewrite: `useLayoutEffect($F, [$$$D])`},
	}},
	{lang: "c", dir: "c", cases: []diffCase{
		{pattern: `unsigned int $F : $W;`, peer: `pattern: {context: "struct S { unsigned int $F : $W; };", selector: field_declaration}`},
		{pattern: `unsigned int $F : $W`, peer: `pattern: {context: "struct S { unsigned int $F : $W; };", selector: field_declaration}`},
		{pattern: `memcpy($D, $S, $N)`},
		{pattern: `return -1;`},
		{pattern: `sizeof($X)`},
		{pattern: `$H->$F = $V`},
		// Anonymous bit-fields (`uint32_t : 4;`) too: $F stands for the
		// name the grammar made up, empty.
		{pattern: `$T $F : $W;`, peer: `pattern: {context: "struct S { $T $F : $W; };", selector: field_declaration}`},
		{pattern: `unsigned $F : $W;`, peer: `pattern: {context: "struct S { unsigned $F : $W; };", selector: field_declaration}`},
	}, edits: []editCase{
		{pattern: `memcpy($D, $S, $N)`, rewrite: `safe_memcpy($D, $S, $N)`},
		{pattern: `if ($A < $B) { $$$BODY }`, rewrite: `if ($B > $A) { $$$BODY }`,
			differs: "ast-grep re-indents only space indentation: the body's second line keeps its two tabs where the match's one-tab indentation is what it takes",
			want:    map[string]string{"include/packet.c": "\tif (8 > len) { /* Too short for a header. */\n\treturn -1; }"}},
		{pattern: `if ($A == $B) { $$$BODY }`, rewrite: "if ($B == $A) {\n\t$$$BODY\n}",
			differs: "ast-grep re-indents only space indentation, and drops the match's tab indentation from the template's lines",
			want:    map[string]string{"include/packet.c": "\t\tif (0 == buf[i]) {\n\t\t\t/* Padding. */\n\t\t\th->length = (unsigned int)i;\n                        break; /* indented with spaces in a tab-indented file */\n\t\t}"}},
	}},
	{lang: "cpp", dir: "cpp", cases: []diffCase{
		{pattern: `unsigned int $F : $W;`, peer: `pattern: {context: "class C { unsigned int $F : $W; };", selector: field_declaration}`},
		{pattern: `std::lock_guard<std::mutex> $L($M);`},
		{pattern: `return nullptr;`},
		{pattern: `$A.push_back($B)`},
		{pattern: `for (const auto &$K : $C) { $$$ }`},
		{pattern: `virtual $T $M() const = 0;`, peer: `pattern: {context: "class C { virtual $T $M() const = 0; };", selector: field_declaration}`},
		// A loop's body as a metavariable is any statement: a block, one
		// statement, another loop.
		{pattern: `for (int $I = 0; $I < $N; ++$I) $$$BODY`},
		{pattern: `for (int $I = 0; $I < $N; ++$I) $BODY`},
		{pattern: `for (int $I = 0; $I < $N; ++$I) { $$$ }`},
	}, edits: []editCase{
		{pattern: `$A.push_back($B)`, rewrite: `$A.emplace_back($B)`},
		{pattern: `if ($C) { $$$BODY }`, rewrite: `if ($C) [[unlikely]] { $$$BODY }`},
	}},
	{lang: "bash", dir: "bash", cases: []diffCase{
		// ast-grep cannot parse this pattern at all ("Multiple AST nodes").
		{pattern: `for $V in $$$L; do $$$B; done`, peer: `kind: for_statement`},
		{pattern: `echo $$$A`},
		{pattern: `mkdir -p $D`},
		{pattern: `set -euo pipefail`},
	}, edits: []editCase{
		{pattern: `echo $$$A`, rewrite: `printf '%s\n' $$$A`},
	}},
	{lang: "rust", dir: "rust", cases: []diffCase{
		{pattern: `Err($E)`},
		{pattern: `println!($$$A)`},
		{pattern: `$X.unwrap()`},
		{pattern: `impl $T for $S { $$$ }`},
		{pattern: `if let Some($P) = $E { $$$ }`},
		{pattern: `Ok(())`},
		{pattern: `pub fn $F(&self, $$$A) -> $R { $$$B }`},
	}, edits: []editCase{
		{pattern: `$X.unwrap()`, rewrite: `$X.expect("ok")`},
		{pattern: `println!($$$A)`, rewrite: `log::info!($$$A)`},
	}},
	{lang: "ruby", dir: "ruby", cases: []diffCase{
		{pattern: `rescue $E => $V`, peer: `pattern: {context: "begin\nrescue $E => $V\nend", selector: rescue}`},
		{pattern: `raise $E, $M`},
		{pattern: `File.join($$$)`},
		{pattern: `attr_reader $$$`},
		{pattern: `$X.each { |$I| $$$ }`},
	}, edits: []editCase{
		{pattern: `raise $E, $M`, rewrite: `raise $E.new($M)`},
		{pattern: `File.join($$$A)`, rewrite: `Pathname($$$A)`},
	}},
	{lang: "java", dir: "java", cases: []diffCase{
		{pattern: `private final $T $F;`, peer: `pattern: {context: "class A { private final $T $F; }", selector: field_declaration}`},
		{pattern: `System.out.println($$$)`},
		{pattern: `throw new $E($$$)`},
		{pattern: `this.$F = $V;`},
		{pattern: `if ($C) { $$$ }`},
		{pattern: `new ArrayList<>($$$)`},
		{pattern: `for (int $I = 0; $I < $N; $I++) $$$BODY`},
		{pattern: `for (int $I = 0; $I < $N; $I++) $BODY`},
		{pattern: `for (int $I = 0; $I < $N; $I++) { $$$ }`},
		{pattern: `while ($C) $BODY`},
	}, edits: []editCase{
		{pattern: `System.out.println($A)`, rewrite: `LOG.info($A)`},
		{pattern: `this.$F = $V;`, rewrite: `this.$F = Objects.requireNonNull($V);`},
		{pattern: `if ($C) { $$$BODY }`, rewrite: "if (!($C)) {\n    $$$BODY\n}"},
	}},
}

// TestDifferentialLanguages compares every search's match set (file, start
// byte, text) and every rewrite's resulting files with the ast-grep CLI.
func TestDifferentialLanguages(t *testing.T) {
	bin := astGrepBin(t)
	reg := NewRegistry()
	searches, searchesSame, edits, editsSame := 0, 0, 0, 0
	for _, d := range langDiffs {
		t.Run(d.lang, func(t *testing.T) {
			l, ok := reg.Lookup(d.lang)
			if !ok {
				t.Fatalf("no grammar %s", d.lang)
			}
			root, _ := filepath.Abs(filepath.Join("testdata", "diff", d.dir))
			peer := peerHits(t, bin, d.lang, root, d.cases)
			ours, listed, unclean := ourHits(t, l, root, nil, d.cases)
			for f := range unclean {
				t.Errorf("%s does not parse cleanly; the shipped trees must", f)
			}
			same := compareHits(t, d.lang, d.cases, ours, peer, listed, unclean)
			searches += len(d.cases)
			searchesSame += same
			for _, e := range d.edits {
				edits++
				if compareEdit(t, bin, l, root, e) {
					editsSame++
				}
			}
		})
	}
	t.Logf("nine languages: %d of %d searches and %d of %d edits agree with ast-grep (documented differences count as agreeing)", searchesSame, searches, editsSame, edits)
}

// compareEdit applies the rewrite with both engines to copies of root and
// compares the trees file by file.
func compareEdit(t *testing.T, bin string, l *Language, root string, e editCase) bool {
	t.Helper()
	theirs := copyTree(t, root)
	rule := e.peer
	if rule == "" {
		rule = "pattern: " + yamlQuote(e.pattern)
	}
	rules := fmt.Sprintf("id: e\nlanguage: %s\nrule:\n%s\nfix: %s\n", l.Name, indent(rule, "  "), yamlQuote(e.rewrite))
	if out, err := exec.Command(bin, "scan", "--inline-rules", rules, "--update-all", theirs).CombinedOutput(); err != nil {
		t.Fatalf("ast-grep scan --update-all: %v: %s", err, out)
	}
	p, err := Compile(context.Background(), l, e.pattern)
	if err != nil {
		t.Errorf("%s edit %q: %v", l.Name, e.pattern, err)
		return false
	}
	files, err := Dir{Root: root}.List(l, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := newParser(l)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	var diffs []string
	changed, wrong := 0, false
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := pr.parse(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		mine := ApplyEdits(src, PlanEdits(src, p.FindAll(tr), e.rewrite))
		if !bytes.Equal(mine, src) {
			changed++
		}
		if w, ok := e.want[f.Path]; ok && !bytes.Contains(mine, []byte(w)) {
			wrong = true
			t.Errorf("%s edit %q -> %q: %s lacks %q:\n%s", l.Name, e.pattern, e.rewrite, f.Path, w, mine)
		}
		peer, err := os.ReadFile(filepath.Join(theirs, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mine, peer) {
			diffs = append(diffs, fmt.Sprintf("  %s: ours\n%s\n  ast-grep's\n%s", f.Path, lineDiff(mine, peer), lineDiff(peer, mine)))
		}
	}
	if changed == 0 {
		t.Errorf("%s edit %q changes nothing: the case tests nothing", l.Name, e.pattern)
	}
	switch {
	case len(diffs) == 0 && e.differs != "":
		t.Errorf("%s edit %q: documented as differing (%s) but the trees are the same; drop the note", l.Name, e.pattern, e.differs)
	case len(diffs) > 0 && e.differs == "":
		t.Errorf("%s edit %q -> %q differs from ast-grep:\n%s", l.Name, e.pattern, e.rewrite, strings.Join(diffs, "\n"))
		return false
	case len(diffs) > 0:
		t.Logf("%s edit %q: documented difference: %s", l.Name, e.pattern, e.differs)
	}
	return !wrong
}

// lineDiff shows the lines of a that b lacks.
func lineDiff(a, b []byte) string {
	in := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		in[l]++
	}
	var out []string
	for _, l := range strings.Split(string(a), "\n") {
		if in[l] > 0 {
			in[l]--
			continue
		}
		out = append(out, fmt.Sprintf("    %q", l))
	}
	return strings.Join(out, "\n")
}

func copyTree(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if de.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func yamlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func indent(s, by string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n")
}
