package txtar

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	got := Parse("a comment\n-- go.mod --\nmodule m\n-- pkg/a.go --\npackage pkg\n\n// -- not a marker\n--  --\n-- last --")
	want := map[string]string{
		"go.mod":   "module m\n",
		"pkg/a.go": "package pkg\n\n// -- not a marker\n--  --\n",
		"last":     "",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse = %q, want %q", got, want)
	}
}

func TestReadFileMissing(t *testing.T) {
	if _, err := ReadFile("testdata/none.txtar"); err == nil {
		t.Fatal("a missing archive read without an error")
	}
}
