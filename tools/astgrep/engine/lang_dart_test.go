//go:build dart

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// flutterApp is the Flutter-style package the Dart tests search.
const flutterApp = "testdata/flutter_app"

type dartHit struct{ file, text, x string }

// searchApp runs pattern over the package and returns file, matched text
// and $X of every match, in order.
func searchApp(t *testing.T, root, pattern string) []dartHit {
	t.Helper()
	e := New()
	l := lang(t, "dart")
	p, err := e.Compile(context.Background(), l, pattern)
	if err != nil {
		t.Fatalf("compile %q: %v", pattern, err)
	}
	files, err := Dir{Root: root}.List(l, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("listed %d .dart files in %s, want 4", len(files), root)
	}
	res, err := e.Search(context.Background(), p, Dir{Root: root}, files)
	if err != nil {
		t.Fatal(err)
	}
	var out []dartHit
	for _, fr := range res {
		for _, m := range fr.Matches {
			x, _ := capture(m, "X")
			out = append(out, dartHit{filepath.Base(fr.File.Path), m.Text, x})
		}
	}
	return out
}

func sameHits(t *testing.T, pattern string, got, want []dartHit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%q: %d matches %q, want %q", pattern, len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%q: match %d = %q, want %q", pattern, i, got[i], want[i])
		}
	}
}

func TestDartIsRegisteredWithAReadableABI(t *testing.T) {
	l, ok := reg.Lookup("dart")
	if !ok {
		t.Fatal("dart is not registered in a build with the dart tag")
	}
	if fl, ok := reg.ForPath("lib/src/widgets/search_box.dart"); !ok || fl != l {
		t.Errorf("ForPath(.dart) = %v, %v", fl, ok)
	}
	if why, missing := reg.Unavailable("dart"); missing {
		t.Errorf("Unavailable(dart) = %q in a build with the grammar", why)
	}
	if v := l.ts.AbiVersion(); v < sitter.MIN_COMPATIBLE_LANGUAGE_VERSION || v > sitter.LANGUAGE_VERSION {
		t.Errorf("ABI %d outside %d..%d", v, sitter.MIN_COMPATIBLE_LANGUAGE_VERSION, sitter.LANGUAGE_VERSION)
	}
}

// The seed's first example: the guarded dispose without braces, found where
// it is code (not in the comment or the string), with the same variable
// both times.
func TestDartSeedGuardedDispose(t *testing.T) {
	const pattern = "if ($X != null) $X.dispose()"
	sameHits(t, pattern, searchApp(t, flutterApp, pattern), []dartHit{
		{"search_box.dart", "if (controller != null) controller.dispose()", "controller"},
		{"video_panel.dart", "if (pages != null) pages.dispose()", "pages"},
	})
	// With braces it finds the braced form, as ast-grep does: a block is
	// not a bare statement.
	const braced = "if ($X != null) { $X.dispose(); }"
	sameHits(t, braced, searchApp(t, flutterApp, braced), []dartHit{
		{"search_box.dart", "if (focus != null) {\n      focus.dispose();\n    }", "focus"},
	})
	// Written with its `;`, the statement includes it.
	const semi = "if ($X != null) $X.dispose();"
	sameHits(t, semi, searchApp(t, flutterApp, semi), []dartHit{
		{"search_box.dart", "if (controller != null) controller.dispose();", "controller"},
		{"video_panel.dart", "if (pages != null) pages.dispose();", "pages"},
	})
}

// `dispose(x)` alone, or at Dart's top level, reads as a function
// signature; the ladder must take the call in a function body.
func TestDartLadderTakesTheCall(t *testing.T) {
	p, err := Compile(context.Background(), lang(t, "dart"), "dispose($X)")
	if err != nil {
		t.Fatal(err)
	}
	if p.Context != "statement" {
		t.Errorf("context = %q, want statement", p.Context)
	}
	if k := p.Lang.ts.NodeKindForId(p.tree.nodes[p.root].kind); k != "expression_statement" {
		t.Errorf("pattern node = %s, want expression_statement (the call)", k)
	}
	const pattern = "dispose($X)"
	sameHits(t, pattern, searchApp(t, flutterApp, pattern), []dartHit{
		{"video_panel.dart", "dispose(playing)", "playing"},
		{"video_panel.dart", "dispose(controller)", "controller"},
		{"video_panel.dart", "dispose(playing)", "playing"},
	})
	// Other fragments parse in the rungs their shape needs.
	for pat, want := range map[string]string{
		"class $C extends StatefulWidget { }":  "declaration",
		"$A ?? $B":                             "statement",
		"setState(() { $$$ })":                 "statement",
		"final $X = TextEditingController();":  "statement",
		"controller = TextEditingController()": "statement",
	} {
		p, err := Compile(context.Background(), lang(t, "dart"), pat)
		if err != nil {
			t.Errorf("%q: %v", pat, err)
			continue
		}
		if p.Context != want {
			t.Errorf("%q: context %q, want %q", pat, p.Context, want)
		}
	}
}

// The seed's second example: `dispose(controller);` becomes
// `controller.dispose();`, and the file still parses cleanly.
func TestDartSeedRewrite(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(flutterApp)); err != nil {
		t.Fatal(err)
	}
	e := New()
	l := lang(t, "dart")
	p, err := e.Compile(context.Background(), l, "dispose($X)")
	if err != nil {
		t.Fatal(err)
	}
	rel := "lib/src/widgets/video_panel.dart"
	src, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.Parse(context.Background(), l, src)
	if err != nil {
		t.Fatal(err)
	}
	out := string(ApplyEdits(src, PlanEdits(src, p.FindAll(tr), "$X.dispose()")))
	for _, want := range []string{"    playing.dispose();\n  }\n", "    controller.dispose();\n    if (pages", "    playing.dispose();\n    super.dispose();"} {
		if !strings.Contains(out, want) {
			t.Errorf("rewritten file lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "dispose(controller)") || strings.Contains(out, "dispose(playing)") {
		t.Errorf("a call was left:\n%s", out)
	}
	if strings.Count(out, "super.dispose();") != 1 || !strings.Contains(out, "void dispose() {") {
		t.Errorf("the method or super call changed:\n%s", out)
	}
	after, err := e.Parse(context.Background(), l, []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if off, bad := after.firstError(); bad {
		t.Errorf("the rewritten file does not parse as Dart at byte %d:\n%s", off, out)
	}
	// The helper's own signature is a declaration, not a call: untouched.
	util, _ := os.ReadFile(filepath.Join(root, "lib/src/util/dispose.dart"))
	ut, _ := e.Parse(context.Background(), l, util)
	if ms := p.FindAll(ut); len(ms) != 0 {
		t.Errorf("the signature `void dispose(ChangeNotifier? notifier)` matched: %q", texts(ms))
	}
}

// Every file of the package parses without an error: the grammar reads
// the Dart the tests are about.
func TestDartPackageParsesCleanly(t *testing.T) {
	e := New()
	l := lang(t, "dart")
	files, _ := Dir{Root: flutterApp}.List(l, 0)
	for _, f := range files {
		src, _ := os.ReadFile(filepath.Join(flutterApp, f.Path))
		tr, err := e.Parse(context.Background(), l, src)
		if err != nil {
			t.Fatal(err)
		}
		if off, bad := tr.firstError(); bad {
			t.Errorf("%s: parse error at byte %d", f.Path, off)
		}
	}
}

// The same searches through the ast-grep CLI, where it is installed. ast-grep
// parses a pattern as given, so `dispose($X)` is a function signature to it;
// the peer gets its documented remedy instead, the fragment in a function
// body with a selector, and both must report the same places. ast-grep
// bundles a newer tree-sitter-dart (with a call node), so agreement here is
// agreement on what the user sees, not on node kinds.
func TestDartAgreesWithAstGrep(t *testing.T) {
	bin := astGrepBin(t)
	cases := []struct{ ours, context, selector string }{
		{"if ($X != null) $X.dispose()", "void f() { if ($X != null) $X.dispose(); }", "if_statement"},
		{"if ($X != null) { $X.dispose(); }", "void f() { if ($X != null) { $X.dispose(); } }", "if_statement"},
		{"dispose($X)", "void f() { dispose($X); }", "expression_statement"},
		{"$X.dispose()", "void f() { $X.dispose(); }", "expression_statement"},
		{"super.dispose();", "void f() { super.dispose(); }", "expression_statement"},
		{"class $X extends StatefulWidget { $$$ }", "", ""},
	}
	root, err := filepath.Abs(flutterApp)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		rule := map[string]any{"pattern": c.ours}
		if c.context != "" {
			rule["pattern"] = map[string]any{"context": c.context, "selector": c.selector}
		}
		q, _ := json.Marshal(map[string]any{"id": "p", "language": "dart", "rule": rule})
		cmd := exec.Command(bin, "scan", "--inline-rules", string(q), "--json=compact", root)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ast-grep scan %s: %v", q, err)
		}
		var peer []struct {
			Text  string `json:"text"`
			File  string `json:"file"`
			Range struct {
				Start struct{ Line int } `json:"start"`
			} `json:"range"`
			Meta struct {
				Single map[string]struct{ Text string } `json:"single"`
			} `json:"metaVariables"`
		}
		if err := json.Unmarshal(out, &peer); err != nil {
			t.Fatalf("ast-grep output: %v", err)
		}
		var want []string
		for _, m := range peer {
			rel, _ := filepath.Rel(root, m.File)
			want = append(want, fmt.Sprintf("%s:%d %s X=%s", filepath.Base(rel), m.Range.Start.Line+1, strings.TrimSuffix(m.Text, ";"), m.Meta.Single["X"].Text))
		}
		var got []string
		e := New()
		l := lang(t, "dart")
		p, err := e.Compile(context.Background(), l, c.ours)
		if err != nil {
			t.Fatal(err)
		}
		files, _ := Dir{Root: root}.List(l, 0)
		res, err := e.Search(context.Background(), p, Dir{Root: root}, files)
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range res {
			for _, m := range fr.Matches {
				x, _ := capture(m, "X")
				got = append(got, fmt.Sprintf("%s:%d %s X=%s", filepath.Base(fr.File.Path), m.Line, strings.TrimSuffix(m.Text, ";"), x))
			}
		}
		sort.Strings(want)
		sort.Strings(got)
		if len(want) == 0 {
			t.Errorf("%q: ast-grep found nothing; the comparison would be empty", c.ours)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%q:\nours:\n  %s\nast-grep:\n  %s", c.ours, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}
