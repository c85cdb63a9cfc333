package files

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

func TestFormatRead(t *testing.T) {
	c := newConfig([]Option{WithReadLimit(3), WithMaxLineChars(5), WithReadOutputBytes(1 << 20)})
	data := []byte("one\ntwo\nthree\nfour\nfive\n")
	res := formatRead("/w/f", data, int64(len(data)), false, 0, 0, c)
	want := "     1\tone\n     2\ttwo\n     3\tthree\n(2 more lines; continue with offset=4.)\n"
	if res.IsError || res.Content[0].Text != want {
		t.Fatalf("got %q", res.Content[0].Text)
	}
	res = formatRead("/w/f", data, int64(len(data)), false, 4, 0, c)
	if res.Content[0].Text != "     4\tfour\n     5\tfive\n" {
		t.Fatalf("offset 4: %q", res.Content[0].Text)
	}
	res = formatRead("/w/f", data, int64(len(data)), false, 9, 0, c)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "offset 9 is past the end of /w/f, which has 5 lines") {
		t.Fatalf("past end: %+v", res)
	}
	res = formatRead("/w/f", []byte("abcdefgh\n"), 9, false, 0, 0, c)
	if res.Content[0].Text != "     1\tabcde [line cut: 3 more characters]\n" {
		t.Fatalf("long line: %q", res.Content[0].Text)
	}
	res = formatRead("/w/f", nil, 0, false, 0, 0, c)
	if res.IsError || res.Content[0].Text != "/w/f is empty (0 bytes)." {
		t.Fatalf("empty: %+v", res)
	}
	res = formatRead("/w/f", []byte("PNG\x00\x01"), 5, false, 0, 0, c)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "is a binary file") {
		t.Fatalf("binary: %+v", res)
	}
	res = formatRead("/w/f", []byte("a\r\nb\r\n"), 6, false, 0, 0, c)
	if res.Content[0].Text != "     1\ta\n     2\tb\n(the file uses CRLF line endings (not shown).)\n" {
		t.Fatalf("crlf: %q", res.Content[0].Text)
	}
	// Truncated data: the partial last line is not shown.
	res = formatRead("/w/f", []byte("a\nb\npart"), 1000, true, 0, 0, c)
	if !strings.Contains(res.Content[0].Text, "     2\tb\n(the file has 1000 bytes") || strings.Contains(res.Content[0].Text, "part") {
		t.Fatalf("truncated: %q", res.Content[0].Text)
	}
}

func TestFormatReadOutputCap(t *testing.T) {
	c := newConfig([]Option{WithReadOutputBytes(100)})
	var b strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "line %d is here\n", i)
	}
	res := formatRead("/w/f", []byte(b.String()), int64(b.Len()), false, 0, 0, c)
	text := res.Content[0].Text
	if len(text) > 300 || !strings.Contains(text, "more lines (this answer reached its 100-byte cap); continue with offset=") {
		t.Fatalf("cap: %q", text)
	}
}

func TestReplace(t *testing.T) {
	text := "a\nfoo\nb\nfoo\n"
	if _, _, msg := replace(text, editArgs{Old: "foo", New: "bar"}); msg != "old occurs 2 times (at lines 2, 4); include more surrounding text to make it unique, or set replace_all to replace all of them" {
		t.Fatalf("ambiguous: %q", msg)
	}
	out, sum, msg := replace(text, editArgs{Old: "foo", New: "bar", ReplaceAll: true})
	if msg != "" || out != "a\nbar\nb\nbar\n" || sum != "replaced 2 occurrences at lines 2, 4" {
		t.Fatalf("replace_all: %q %q %q", out, sum, msg)
	}
	out, sum, _ = replace(text, editArgs{Old: "b\nfoo", New: "c"})
	if out != "a\nfoo\nc\n" || sum != "replaced 1 occurrence at line 3" {
		t.Fatalf("unique: %q %q", out, sum)
	}
	_, _, msg = replace("func f() {\n\treturn 1\n}\n", editArgs{Old: "func f() {\n    return 1\n}", New: "x"})
	if !strings.Contains(msg, "same text with different whitespace is at line 1") {
		t.Fatalf("near miss: %q", msg)
	}
	_, _, msg = replace(text, editArgs{Old: "zzz", New: "x"})
	if !strings.HasPrefix(msg, "old was not found in the file") {
		t.Fatalf("missing: %q", msg)
	}
	out, _, msg = replace("a\r\nb\r\n", editArgs{Old: "a\nb", New: "x\ny"})
	if msg != "" || out != "x\r\ny\r\n" {
		t.Fatalf("crlf: %q %q", out, msg)
	}
}

func TestFormatExec(t *testing.T) {
	r := formatExec(&proto.ExecResponse{ExitCode: 3, Stdout: []byte("hi\n")}, time.Minute, 8)
	if r.IsError || r.Content[0].Text != "exit status 3\n--- stdout ---\nhi\n--- stderr: (empty)" {
		t.Fatalf("%q", r.Content[0].Text)
	}
	r = formatExec(&proto.ExecResponse{TimedOut: true, Signal: "KILL", Stdout: []byte("headtail"), StdoutOmitted: 100}, 2*time.Second, 8)
	want := "timed out after 2s; the command and its process group were killed\n--- stdout ---\nhead\n[... 100 bytes omitted ...]\ntail\n--- stderr: (empty)"
	if !r.IsError || r.Content[0].Text != want {
		t.Fatalf("%q", r.Content[0].Text)
	}
	r = formatExec(&proto.ExecResponse{Signal: "SEGV"}, time.Minute, 8)
	if !strings.HasPrefix(r.Content[0].Text, "killed by signal SEGV") {
		t.Fatalf("%q", r.Content[0].Text)
	}
}

func TestAppendNumberedIsCatN(t *testing.T) {
	for _, n := range []int{1, 9, 10, 99999, 999999, 1000000, 123456789} {
		for _, line := range []string{"", "x", "\tindented ünïcode"} {
			want := fmt.Sprintf("%6d\t%s\n", n, line)
			got := string(appendNumbered([]byte("prefix"), n, line))
			if got != "prefix"+want || numberedLen(n, line) != len(want) {
				t.Errorf("line %d %q: got %q (length %d), want %q", n, line, got, numberedLen(n, line), want)
			}
		}
	}
}
