package engine

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The one-call C walk and the cursor walk from Go must build the same tree.
func TestFlattenInCMatchesGoWalk(t *testing.T) {
	srcs := map[string]string{
		"go":     "package p\n\n// c\nfunc f() { if err != nil { return } ; x := `s` }\n",
		"python": "def f(:\n  pass\n",
		"c":      "int main(void) { dispose(x) }\n",
	}
	if b, err := os.ReadFile(filepath.Join(goRoot(t), "src", "fmt", "print.go")); err == nil {
		srcs["go"] = string(b)
	}
	for name, src := range srcs {
		l := lang(t, name)
		pr, err := newParser(l)
		if err != nil {
			t.Fatal(err)
		}
		ts := pr.p.Parse([]byte(src), nil)
		a := flattenC(ts, []byte(src))
		b := flatten(ts, []byte(src))
		ts.Close()
		pr.Close()
		if a == nil {
			t.Fatalf("%s: the C walk gave up", name)
		}
		if !reflect.DeepEqual(a.nodes, b.nodes) {
			t.Errorf("%s: C walk %d nodes, Go walk %d nodes, and they differ", name, len(a.nodes), len(b.nodes))
		}
	}
}
