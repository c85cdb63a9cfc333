package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file rewritten with the same size within the same modification time
// looks unchanged to the cache; Forget, fed by the workspace watch, makes
// the next search read and parse it again.
func TestForgetDropsAChangedFileThatLooksTheSame(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.go")
	if err := os.WriteFile(p, []byte("package a\nvar _ = f(Old)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	key := FileKey{Path: "a.go", Size: fi.Size(), ModTime: fi.ModTime()}
	e := New()
	l := lang(t, "go")
	pat, err := e.Compile(context.Background(), l, "f($F)")
	if err != nil {
		t.Fatal(err)
	}
	search := func() string {
		t.Helper()
		res, err := e.Search(context.Background(), pat, Dir{Root: dir}, []FileKey{key})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || len(res[0].Matches) != 1 {
			t.Fatalf("want one match, got %+v", res)
		}
		name, _ := capture(res[0].Matches[0], "F")
		return name
	}
	if got := search(); got != "Old" {
		t.Fatalf("first search found %q, want Old", got)
	}
	// Same size, same recorded time: the cache cannot tell.
	if err := os.WriteFile(p, []byte("package a\nvar _ = f(New)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, time.Now(), fi.ModTime())
	if got := search(); got != "Old" {
		t.Fatalf("without Forget the cached answer should stand (the fallback check cannot see this change), got %q", got)
	}
	if n := e.Forget("a.go"); n == 0 {
		t.Fatal("Forget dropped nothing for a cached file")
	}
	if got := search(); got != "New" {
		t.Fatalf("after Forget the search found %q, want New", got)
	}
	e.Forget("a.go")
	search()
	if n := e.ForgetPrefix("a."); n == 0 {
		t.Fatal("ForgetPrefix dropped nothing")
	}
}
