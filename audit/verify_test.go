package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var jsonUnmarshal = json.Unmarshal

// chainDir writes n records across a few files and returns the dir.
func chainDir(t *testing.T, n int) string {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, MaxFileBytes: 4096})
	for range n {
		if err := l.Append(rec("a", "GET /v1/runs"), false); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	return dir
}

// rewrite applies f to the lines of the file holding seq, and returns that
// file's name and the seq's line number.
func rewrite(t *testing.T, dir string, seq uint64, f func(lines [][]byte, i int) [][]byte) (string, int) {
	files, _ := listFiles(dir)
	for _, fl := range files {
		p := filepath.Join(dir, fl.name)
		b, _ := os.ReadFile(p)
		ls := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		for i, l := range ls {
			if r, _ := parse(l); r.Seq == seq {
				ls = f(ls, i)
				os.WriteFile(p, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600)
				return fl.name, i + 1
			}
		}
	}
	t.Fatalf("seq %d not found", seq)
	return "", 0
}

func TestVerifyNamesTheRecordThatWasChanged(t *testing.T) {
	dir := chainDir(t, 60)
	file, line := rewrite(t, dir, 20, func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte(`"tenant":"a"`), []byte(`"tenant":"b"`), 1)
		return ls
	})
	rep, err := Verify(dir)
	if err != nil || rep.Break == nil {
		t.Fatalf("an edited record was not found: %+v %v", rep, err)
	}
	b := rep.Break
	if b.Kind != BreakChanged || b.Seq != 20 || b.File != file || b.Line != line {
		t.Fatalf("found %+v, want seq 20 changed at %s line %d", b, file, line)
	}
	if !strings.Contains(rep.Sentence(), "seq 20") || !strings.Contains(rep.Sentence(), "changed") {
		t.Fatalf("sentence: %s", rep.Sentence())
	}
}

func TestVerifyNamesTheRecordThatWasRemoved(t *testing.T) {
	dir := chainDir(t, 60)
	rewrite(t, dir, 33, func(ls [][]byte, i int) [][]byte { return append(ls[:i:i], ls[i+1:]...) })
	rep, _ := Verify(dir)
	if rep.Break == nil || rep.Break.Kind != BreakRemoved || rep.Break.Seq != 33 {
		t.Fatalf("found %+v, want seq 33 removed", rep.Break)
	}
	if !strings.Contains(rep.Sentence(), "seq 33 was removed") {
		t.Fatalf("sentence: %s", rep.Sentence())
	}
}

func TestVerifyNamesTheRecordsThatWereSwapped(t *testing.T) {
	dir := chainDir(t, 60)
	var file string
	var line int
	file, line = rewrite(t, dir, 41, func(ls [][]byte, i int) [][]byte {
		if i+1 >= len(ls) {
			t.Skip("seq 41 ends a file; the swap needs its successor in the same file")
		}
		ls[i], ls[i+1] = ls[i+1], ls[i]
		return ls
	})
	rep, _ := Verify(dir)
	if rep.Break == nil || rep.Break.Kind != BreakReordered || rep.Break.Seq != 42 || rep.Break.File != file || rep.Break.Line != line {
		t.Fatalf("found %+v, want seq 42 reordered at %s line %d", rep.Break, file, line)
	}
	if !strings.Contains(rep.Sentence(), "seq 42") || !strings.Contains(rep.Sentence(), "reordered") {
		t.Fatalf("sentence: %s", rep.Sentence())
	}
}

func TestVerifyFindsAWholeFileRemovedFromTheMiddle(t *testing.T) {
	dir := chainDir(t, 100)
	files, _ := listFiles(dir)
	if len(files) < 3 {
		t.Fatalf("want 3 files or more, have %d", len(files))
	}
	os.Remove(filepath.Join(dir, files[1].name))
	rep, _ := Verify(dir)
	if rep.Break == nil || rep.Break.Kind != BreakRemoved || rep.Break.Seq != files[1].first {
		t.Fatalf("found %+v, want seq %d removed", rep.Break, files[1].first)
	}
}

func TestVerifyFindsASeqEdited(t *testing.T) {
	dir := chainDir(t, 10)
	rewrite(t, dir, 5, func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte(`"seq":5,`), []byte(`"seq":50,`), 1)
		return ls
	})
	rep, _ := Verify(dir)
	if rep.Break == nil || rep.Break.Kind != BreakChanged {
		t.Fatalf("found %+v, want a change", rep.Break)
	}
}
