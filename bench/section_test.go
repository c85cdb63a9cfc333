package bench

import (
	"os"
	"strings"
	"testing"
)

func TestReplaceSection(t *testing.T) {
	start, end := Markers("read4k")
	doc := "# Benchmarks\n\nprose kept\n\n" + start + "\nold figures\n" + end + "\n\nmore prose\n" +
		"<!-- bench:idle:start -->\nidle figures\n<!-- bench:idle:end -->\n"

	got, err := ReplaceSection(doc, "read4k", "\nnew figures\n| a | b |\n\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nprose kept\n\n" + start + "\nnew figures\n| a | b |\n" + end + "\n\nmore prose\n" +
		"<!-- bench:idle:start -->\nidle figures\n<!-- bench:idle:end -->\n"
	if got != want {
		t.Errorf("replaced:\n%s\nwant:\n%s", got, want)
	}

	// A rerun with the same body is a fixed point.
	again, err := ReplaceSection(got, "read4k", "new figures\n| a | b |")
	if err != nil || again != got {
		t.Errorf("second replace changed the document (err %v):\n%s", err, again)
	}

	// A section not there yet is appended after one blank line.
	added, err := ReplaceSection("# Benchmarks\nintro", "create", "c")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Benchmarks\nintro\n\n<!-- bench:create:start -->\nc\n<!-- bench:create:end -->\n"; added != want {
		t.Errorf("appended:\n%q\nwant:\n%q", added, want)
	}
	fromEmpty, _ := ReplaceSection("", "create", "c")
	if !strings.HasPrefix(fromEmpty, "<!-- bench:create:start -->") {
		t.Errorf("from an empty document: %q", fromEmpty)
	}
}

func TestReplaceSectionRefusesBrokenMarkers(t *testing.T) {
	start, end := Markers("read4k")
	for name, doc := range map[string]string{
		"start without end": "x\n" + start + "\nfigures\n",
		"end without start": "x\n" + end + "\n",
		"end before start":  end + "\n" + start + "\n",
		"section twice":     start + "\na\n" + end + "\n" + start + "\nb\n" + end + "\n",
	} {
		if out, err := ReplaceSection(doc, "read4k", "new"); err == nil {
			t.Errorf("%s: no error; got %q", name, out)
		}
	}
	for _, bad := range []string{"", "Read4K", "a b", "x-->", "-lead"} {
		if _, err := ReplaceSection("", bad, "b"); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}

func TestWriteSectionCreatesAndReplaces(t *testing.T) {
	path := t.TempDir() + "/BENCHMARKS.md"
	if err := WriteSection(path, "one", "first"); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "two", "second"); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "one", "again"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if strings.Contains(s, "first") || !strings.Contains(s, "again") || !strings.Contains(s, "second") ||
		strings.Index(s, "again") > strings.Index(s, "second") {
		t.Fatalf("after three writes the file is:\n%s", s)
	}
}
