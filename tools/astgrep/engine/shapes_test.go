package engine

import (
	"slices"
	"strings"
	"testing"
)

// Shapes of real code where this engine and the ast-grep CLI once
// disagreed; every expectation below is what ast-grep 0.51 reports for
// the same pattern and source (difflangs_test.go and realtrees_test.go
// compare with the CLI itself over whole trees).

// matchesWith lists each match's text and the named captures' texts, as
// "text | NAME=capture ...", captures in the order given.
func matchesWith(ms []Match, names ...string) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		parts := []string{m.Text}
		for _, n := range names {
			c, ok := capture(m, n)
			if !ok {
				c = "<unbound>"
			}
			parts = append(parts, n+"="+c)
		}
		out[i] = strings.Join(parts, " | ")
	}
	return out
}

func wantMatches(t *testing.T, language, pattern string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s %q:\n got  %q\n want %q", language, pattern, got, want)
	}
}

// A loop body written as a metavariable is any statement: a block, one
// statement, another loop. The C-like ladders read the fragment with a `;`
// after it; that `;` must not make the body an expression statement.
func TestLoopBodyMetavariableIsAnyStatement(t *testing.T) {
	java := `class L {
  void f(int[] a, int n) {
    for (int i = 0; i < n; i++) { a[i] = 0; }
    for (int i = 0; i < n; i++) a[i]++;
    for (int j = 0; j < n; j++) {}
    for (int i = 0; i < n; i++) for (int k = 0; k < i; k++) a[k]--;
    for (int i = 0; j < n; i++) {}
  }
}
`
	wantJava := []string{
		"for (int i = 0; i < n; i++) { a[i] = 0; } | I=i | BODY={ a[i] = 0; }",
		"for (int i = 0; i < n; i++) a[i]++; | I=i | BODY=a[i]++;",
		"for (int j = 0; j < n; j++) {} | I=j | BODY={}",
		"for (int i = 0; i < n; i++) for (int k = 0; k < i; k++) a[k]--; | I=i | BODY=for (int k = 0; k < i; k++) a[k]--;",
		"for (int k = 0; k < i; k++) a[k]--; | I=k | BODY=a[k]--;",
	}
	for _, p := range []string{`for (int $I = 0; $I < $N; $I++) $$$BODY`, `for (int $I = 0; $I < $N; $I++) $BODY`} {
		wantMatches(t, "java", p, matchesWith(find(t, "java", p, java), "I", "BODY"), wantJava)
	}

	cpp := `void f(int *a, int n) {
  for (int i = 0; i < n; ++i) { a[i] = 0; }
  for (int i = 0; i < n; ++i) a[i]++;
  for (int j = 0; j < n; ++j) {}
  for (int i = 0; i < n; ++i) for (int k = 0; k < i; ++k) a[k]--;
  for (int i = 0; j < n; ++i) {}
}
`
	wantCpp := []string{
		"for (int i = 0; i < n; ++i) { a[i] = 0; } | BODY={ a[i] = 0; }",
		"for (int i = 0; i < n; ++i) a[i]++; | BODY=a[i]++;",
		"for (int j = 0; j < n; ++j) {} | BODY={}",
		"for (int i = 0; i < n; ++i) for (int k = 0; k < i; ++k) a[k]--; | BODY=for (int k = 0; k < i; ++k) a[k]--;",
		"for (int k = 0; k < i; ++k) a[k]--; | BODY=a[k]--;",
	}
	for _, l := range []string{"cpp", "c"} {
		p := `for (int $I = 0; $I < $N; ++$I) $BODY`
		wantMatches(t, l, p, matchesWith(find(t, l, p, cpp), "BODY"), wantCpp)
	}
	p := `for (int $I = 0; $I < $N; ++$I) { $$$ }`
	wantMatches(t, "cpp", p, texts(find(t, "cpp", p, cpp)), []string{
		"for (int i = 0; i < n; ++i) { a[i] = 0; }",
		"for (int j = 0; j < n; ++j) {}",
	})

	// The same holds for the other statements with a body.
	p = `while ($C) $BODY`
	wantMatches(t, "java", p, matchesWith(find(t, "java", p, "class W { void f(int n) {\n while (n > 9) { n--; }\n while (n > 1) n /= 2;\n} }\n"), "BODY"), []string{
		"while (n > 9) { n--; } | BODY={ n--; }",
		"while (n > 1) n /= 2; | BODY=n /= 2;",
	})
}

// An anonymous bit-field (`unsigned :8;`, padding) is a bit-field too: the
// grammar gives it a made-up, empty field name, and a one-node
// metavariable stands for that name, as in ast-grep.
func TestAnonymousBitFieldNameIsEmpty(t *testing.T) {
	src := "struct r {\n\tunsigned int enable : 1;\n\tunsigned int : 7;\n\tunsigned :8;\n\tint x;\n};\n"
	p := `$T $F : $W;`
	wantMatches(t, "c", p, matchesWith(find(t, "c", p, src), "T", "F", "W"), []string{
		"unsigned int enable : 1; | T=unsigned int | F=enable | W=1",
		"unsigned int : 7; | T=unsigned int | F= | W=7",
		"unsigned :8; | T=unsigned | F= | W=8",
	})
	p = `unsigned int $F : $W;`
	wantMatches(t, "c", p, matchesWith(find(t, "c", p, src), "F"), []string{
		"unsigned int enable : 1; | F=enable",
		"unsigned int : 7; | F=",
	})
	// The empty name sits right after the type, as ast-grep places it.
	if ms := find(t, "c", `$T $F : $W;`, src); len(ms) == 3 {
		var tEnd uint32
		for _, c := range ms[1].Captures {
			switch c.Name {
			case "T":
				tEnd = c.End
			case "F":
				if c.Start != c.End || c.Start != tEnd {
					t.Errorf("the anonymous field's $F spans [%d, %d), want an empty span at %d, the end of its type", c.Start, c.End, tEnd)
				}
			}
		}
	}
	// A node the parser made up is no match of its own.
	for _, m := range find(t, "c", `$X`, src) {
		if m.Start == m.End {
			t.Errorf("$X matched the empty name at byte %d", m.Start)
		}
	}
}

// A TypeScript member pattern keeps its modifier keyword: members without
// it, or with another, are no match.
func TestMemberPatternKeepsItsModifier(t *testing.T) {
	src := `class A {
  private a = 1;
  b = 2;
  protected c = 3;
  static d = 4;
  private static e = 5;
  private f: number;
  private g: string = "x";
  h: number;
  private m(x: number) { return x; }
  n(x: number) { return x; }
  static s(x: number) { return x; }
}
class B { private only = 1 }
class C { plain = 1 }
`
	for _, l := range []string{"typescript", "tsx"} {
		for _, c := range []struct {
			pattern string
			want    []string
		}{
			{`private $F = $V`, []string{"private a = 1", "private only = 1"}},
			{`static $X = $Y`, []string{"static d = 4"}},
			{`private $M($$$A) { $$$B }`, []string{"private m(x: number) { return x; }"}},
			{`class $C { private $F = $V }`, []string{"class B { private only = 1 }"}},
			// Written with its `;`, the pattern is the member, and the
			// match is the member (the `;` belongs to the class body).
			{`private $F: $T;`, []string{"private f: number", `private g: string = "x"`}},
			{`static $X = $Y;`, []string{"static d = 4"}},
		} {
			wantMatches(t, l, c.pattern, texts(find(t, l, c.pattern, src)), c.want)
		}
	}
}
