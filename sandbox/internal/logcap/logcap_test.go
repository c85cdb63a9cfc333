package logcap

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLinesAndCap(t *testing.T) {
	var out bytes.Buffer
	w := New(slog.New(slog.NewTextHandler(&out, nil)), 10)
	w.Write([]byte("hello\nwor"))
	w.Write([]byte("ld\n"))
	w.Write([]byte("third line\nfourth\n"))
	w.Flush()
	got := out.String()
	for _, want := range []string{"msg=hello", "msg=world", "further output dropped"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "third") || strings.Contains(got, "fourth") {
		t.Errorf("lines past the cap were logged:\n%s", got)
	}
	if n := strings.Count(got, "further output dropped"); n != 1 {
		t.Errorf("drop notice logged %d times, want once", n)
	}
}

func TestLongLineIsCut(t *testing.T) {
	var out bytes.Buffer
	w := New(slog.New(slog.NewTextHandler(&out, nil)), 1<<20)
	w.Write(bytes.Repeat([]byte("x"), 3*maxLine))
	w.Write([]byte("\n"))
	if n := strings.Count(out.String(), "level=WARN"); n < 1 || n > 2 {
		t.Errorf("a long line gave %d log records, want 1 or 2:\n%.200s", n, out.String())
	}
}
