package debug

import (
	"strings"
	"testing"
)

func TestAdapterErrorLine(t *testing.T) {
	tb := "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    compile(e)\n  File \"<string>\", line 1\n    x +* 2)\n          ^\nSyntaxError: unmatched ')'\n"
	if got := adapterErrorLine(tb); got != "SyntaxError: unmatched ')'" {
		t.Errorf("traceback: got %q", got)
	}
	if got := adapterErrorLine("name 'y' is not defined"); got != "name 'y' is not defined" {
		t.Errorf("plain message changed: %q", got)
	}
}

func TestStartLogKeepsHeadAndTail(t *testing.T) {
	var l startLog
	l.add("first-line\n")
	for i := 0; i < 2000; i++ {
		l.add("middle middle middle\n")
	}
	l.add("last-line\n")
	s := l.String()
	if !strings.HasPrefix(s, "first-line") || !strings.HasSuffix(s, "last-line") || !strings.Contains(s, "bytes left out") {
		t.Errorf("head/tail not kept:\n%.200s … %.200s", s, s[len(s)-200:])
	}
	if len(s) > 2*startLogCap+100 {
		t.Errorf("start log is %d bytes, over its cap", len(s))
	}
	l.close()
	l.add("after")
	if l.String() != "" {
		t.Errorf("output after the start was kept")
	}
}
