package toolstest

import (
	"strings"
	"testing"
)

// fatalRecorder records a Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = format
	panic(r)
}
func (r *fatalRecorder) Fatal(args ...any) { r.Fatalf("fatal"); panic(r) }

func fails(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		f(r)
	}()
	return r.msg
}

func TestPositionsAreFoundByText(t *testing.T) {
	src := "package p\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"
	if got := LineOf(t, src, "func Add"); got != 3 {
		t.Errorf("LineOf(func Add) = %d, want 3", got)
	}
	if got := PosOf(t, src, "a + b", 4); got != (Pos{Line: 4, Col: 13}) {
		t.Errorf("PosOf(a + b, 4) = %+v, want line 4 col 13 (the b)", got)
	}
	if got := PosOf(t, src, "package"); got != (Pos{Line: 1, Col: 1}) {
		t.Errorf("PosOf(package) = %+v, want 1:1", got)
	}
	fx := Fixture{"p.go": src}
	if got := fx.At(t, "p.go", "return a"); got != "p.go:4:" {
		t.Errorf("At = %q, want p.go:4:", got)
	}
	moved := fx.With("p.go", "// new first line\n"+src)
	if got := moved.Line(t, "p.go", "return a"); got != 5 {
		t.Errorf("after adding a line: %d, want 5", got)
	}
	if got := fx.Line(t, "p.go", "return a"); got != 4 {
		t.Errorf("With changed the original fixture: %d, want 4", got)
	}
}

func TestPositionsMustBeUnique(t *testing.T) {
	src := "a := 1\nb := a\n"
	for text, want := range map[string]string{"a": "times", "zz": "does not hold"} {
		if msg := fails(t, func(tb testing.TB) { LineOf(tb, src, text) }); !strings.Contains(msg, want) {
			t.Errorf("LineOf(%q) failed with %q, want it to say %q", text, msg, want)
		}
	}
	if msg := fails(t, func(tb testing.TB) { Fixture{}.Line(tb, "x.go", "a") }); !strings.Contains(msg, "no file") {
		t.Errorf("a missing file failed with %q", msg)
	}
}
