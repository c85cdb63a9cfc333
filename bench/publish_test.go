package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPublishSmokeLeavesTheFileAlone(t *testing.T) {
	t.Setenv(CommitEnv, "v1.2.3-4-gabcdef")
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	doc := "# B\n\n<!-- bench:eval:start -->\nold\n<!-- bench:eval:end -->\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := Publish(path, "eval", "## eval\n\n| a | b |\n| 1 | 2 |\n", true, &log); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != doc {
		t.Errorf("a smoke run rewrote the file:\n%s", got)
	}
	if !strings.Contains(log.String(), "section eval renders and reads back") {
		t.Errorf("smoke log = %q", log.String())
	}
}

func TestPublishSmokeRefusesABrokenSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	for _, tc := range []struct{ doc, body, want string }{
		{"", "no heading\n| a |\n", "heading"},
		{"", "## h\nno table\n", "no table"},
		{"", "## h\n| %!d(string=x) |\n", "formatting error"},
		{"<!-- bench:x:start -->\n", "## h\n| a |\n", "markers"},
	} {
		os.WriteFile(path, []byte(tc.doc), 0o644)
		err := Publish(path, "x", tc.body, true, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Publish(%q, %q) = %v, want an error about %s", tc.doc, tc.body, err, tc.want)
		}
	}
}

func TestPublishStampsTheSection(t *testing.T) {
	t.Setenv(CommitEnv, "v9-1-g0123abc-dirty")
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := Publish(path, "core", "## core\n\n| a |\n", false, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(path)
	got, err := ReadSection(string(doc), "core")
	if err != nil {
		t.Fatal(err)
	}
	last := got[strings.LastIndex(got, "\n")+1:]
	if !strings.HasPrefix(last, "_Generated from commit `v9-1-g0123abc-dirty` on "+time.Now().UTC().Format("2006-01-02")) {
		t.Errorf("section does not end with the stamp:\n%s", got)
	}
}

func TestReadSection(t *testing.T) {
	doc := "x\n<!-- bench:a:start -->\nbody\nmore\n<!-- bench:a:end -->\n"
	if got, err := ReadSection(doc, "a"); err != nil || got != "body\nmore" {
		t.Errorf("ReadSection = %q, %v", got, err)
	}
	if _, err := ReadSection(doc, "b"); err == nil {
		t.Error("a missing section read without error")
	}
}
