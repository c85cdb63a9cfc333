package toolstest

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/txtar"
)

// Fixture is a test workspace's files by name. A test finds the positions
// it names by searching for their text, as gopls' marker tests do, not by
// line numbers that go stale whenever the fixture changes.
type Fixture map[string]string

// ReadFixture reads txtar archives into one Fixture; a file in a later
// archive replaces one of the same name.
func ReadFixture(t testing.TB, archives ...string) Fixture {
	t.Helper()
	f := Fixture{}
	for _, a := range archives {
		files, err := txtar.ReadFile(a)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(f, files)
	}
	return f
}

// Line is the 1-based line of file that holds text (see LineOf).
func (f Fixture) Line(t testing.TB, file, text string) int {
	t.Helper()
	return LineOf(t, f.src(t, file), text)
}

// Pos is the 1-based line and column of text in file (see PosOf).
func (f Fixture) Pos(t testing.TB, file, text string, offset ...int) Pos {
	t.Helper()
	return PosOf(t, f.src(t, file), text, offset...)
}

// At is "file:LINE:", how the tools print the location of text in file.
func (f Fixture) At(t testing.TB, file, text string) string {
	t.Helper()
	return fmt.Sprintf("%s:%d:", file, f.Line(t, file, text))
}

// With returns a copy of f whose file holds text instead: the fixture as
// a test changed it (an edit, a line added by a shell command), to search
// for positions after the change.
func (f Fixture) With(file, text string) Fixture {
	g := maps.Clone(f)
	g[file] = text
	return g
}

func (f Fixture) src(t testing.TB, file string) string {
	t.Helper()
	src, ok := f[file]
	if !ok {
		t.Fatalf("the fixture has no file %s", file)
	}
	return src
}

// Pos is a position in a fixture: Line and Col 1-based, Col in bytes.
type Pos struct{ Line, Col int }

// LineOf is the 1-based line of src that holds text. text must occur
// exactly once in src, so that a fixture grown later cannot move the
// position silently to another match; it may span lines (its first line
// counts).
func LineOf(t testing.TB, src, text string) int {
	t.Helper()
	return PosOf(t, src, text).Line
}

// PosOf is the position of the one occurrence of text in src, moved
// offset bytes into it (default 0: its first byte), e.g. PosOf(t, src,
// "s.Side", 2) for Side.
func PosOf(t testing.TB, src, text string, offset ...int) Pos {
	t.Helper()
	if text == "" {
		t.Fatal("PosOf needs the text to search for")
	}
	switch n := strings.Count(src, text); n {
	case 0:
		t.Fatalf("the fixture does not hold %q", text)
	case 1:
	default:
		t.Fatalf("the fixture holds %q %d times; search for a longer text that occurs once", text, n)
	}
	off := 0
	for _, o := range offset {
		off += o
	}
	if off < 0 || off > len(text) {
		t.Fatalf("offset %d lies outside %q", off, text)
	}
	at := strings.Index(src, text) + off
	line := strings.Count(src[:at], "\n") + 1
	col := at - (strings.LastIndex(src[:at], "\n") + 1) + 1
	return Pos{Line: line, Col: col}
}
