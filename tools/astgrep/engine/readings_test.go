package engine

import (
	"context"
	"strings"
	"testing"
)

// Each fragment here can be read by a rung as something else, which then
// finds nothing: every one must find what it says, and only that.
func TestLadderReadsTheFragmentAsWhatItMeans(t *testing.T) {
	for _, c := range []struct {
		lang, pattern, src string
		want               []string
	}{
		{"javascript", "$K: $V", "const o = { a: 1, b: f(2) };\nouter: for (;;) { break outer; }\n",
			[]string{"a: 1", "b: f(2)"}},
		{"java", "private final $T $F;", "class A {\n  private final int x;\n  private int y;\n  void f() { final int z = 1; }\n}\n",
			[]string{"private final int x;"}},
		{"ruby", "rescue $E => $V", "begin\n  x\nrescue IOError => e\n  puts e\nend\nrescue(a => b)\n",
			[]string{"rescue IOError => e\n  puts e"}},
		{"typescript", "readonly $P: $_", "interface I { readonly p: string; q: number }\nclass C { readonly r: number = 1; s = 2 }\n",
			[]string{"readonly p: string", "readonly r: number = 1"}},
		{"c", "unsigned int $F : $W;", "struct s { unsigned int f : 3; unsigned int g; int h : 2; };\n",
			[]string{"unsigned int f : 3;"}},
		{"c", "unsigned int $F : $W", "struct s { unsigned int f : 3; unsigned int g; };\n",
			[]string{"unsigned int f : 3;"}},
		{"cpp", "if ($C) { $$$ }", "void f() {\n  if (a) {\n    g();\n  }\n}\n",
			[]string{"if (a) {\n    g();\n  }"}},
		{"bash", "for $V in $$$L; do $$$B; done", "for f in a b; do\n  echo \"$f\"\ndone\nwhile true; do break; done\n",
			[]string{"for f in a b; do\n  echo \"$f\"\ndone"}},
	} {
		got := texts(find(t, c.lang, c.pattern, c.src))
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s %q: matches %q, want %q", c.lang, c.pattern, got, c.want)
		}
	}
}

// Where a fragment reads well in more than one rung, each reading is
// searched; a match two readings share is reported once.
func TestEveryFittingReadingIsSearched(t *testing.T) {
	p, err := Compile(context.Background(), lang(t, "typescript"), "readonly $P: $_")
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Readings(); strings.Join(r, ",") != "class member,interface member" {
		t.Errorf("readings %q, want class member and interface member", r)
	}
	// The same call from the statement and the expression rung is one
	// reading, and one match.
	p, err = Compile(context.Background(), lang(t, "javascript"), "f($X)")
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Readings(); len(r) != 1 || r[0] != "statement" {
		t.Errorf("f($X): readings %q, want the statement alone", r)
	}
	if ms := find(t, "javascript", "f($X)", "f(1);\n"); len(ms) != 1 {
		t.Errorf("f($X): %q", texts(ms))
	}
	// A rung that glues a metavariable into a token (`$V;` as a macro's
	// text) is no reading.
	p, err = Compile(context.Background(), lang(t, "c"), "#define $N $V")
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Readings(); len(r) != 1 {
		t.Errorf("#define $N $V: readings %q, want one", r)
	}
	if ms := find(t, "c", "#define $N $V", "#define A 1\n#define B(x) x\n"); len(ms) != 1 || !strings.HasPrefix(ms[0].Text, "#define A 1") {
		t.Errorf("#define $N $V: %q", texts(ms))
	}
	if _, err := Compile(context.Background(), lang(t, "javascript"), "a: : b"); err == nil || !strings.Contains(err.Error(), "unparseable") {
		t.Errorf("a fragment no rung parses: %v, want unparseable", err)
	}
}

// A multi-line capture that lands where it was keeps its lines byte for
// byte, even those indented unlike its first line (spaces in a file of
// tabs); a comment opening a $$$ body is kept.
func TestRewriteKeepsLinesThatDidNotMoveAndLeadingComments(t *testing.T) {
	src := "void f(void)\n{\n\tif (a == b) {\n\t\t/* first */\n\t\tg();\n                h();\n\t}\n}\n"
	l := lang(t, "c")
	p, err := Compile(context.Background(), l, "if ($A == $B) { $$$BODY }")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New().Parse(context.Background(), l, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := string(ApplyEdits(tr.Src, PlanEdits(tr.Src, p.FindAll(tr), "if ($B == $A) {\n\t$$$BODY\n}")))
	want := "void f(void)\n{\n\tif (b == a) {\n\t\t/* first */\n\t\tg();\n                h();\n\t}\n}\n"
	if got != want {
		t.Errorf("rewrite:\n%q\nwant:\n%q", got, want)
	}
	// Moved one level out, the odd line takes the new indentation.
	got = string(ApplyEdits(tr.Src, PlanEdits(tr.Src, p.FindAll(tr), "$$$BODY")))
	want = "void f(void)\n{\n\t/* first */\n\tg();\n\th();\n}\n"
	if got != want {
		t.Errorf("unwrap:\n%q\nwant:\n%q", got, want)
	}
}

// A run before the pattern's closing punctuation keeps every node the
// target has there: a loop body written one command a line has no `;`
// for the pattern's `;` to stand for.
func TestRunBeforePunctuationKeepsItsLastNode(t *testing.T) {
	for src, want := range map[string]string{
		"for f in a b; do\n  echo 1\n  echo 2\ndone\n": "echo 1\n  echo 2",
		"for f in a b; do echo 1; echo 2; done\n":      "echo 1; echo 2",
	} {
		ms := find(t, "bash", "for $V in $$$L; do $$$B; done", src)
		if len(ms) != 1 {
			t.Fatalf("%q: %d matches", src, len(ms))
		}
		if got, _ := capture(ms[0], "B"); got != want {
			t.Errorf("%q: $$$B = %q, want %q", src, got, want)
		}
	}
}
