package bench

import (
	"strings"
	"testing"
)

func TestServingLine(t *testing.T) {
	m := servingLine.FindStringSubmatch("sandboxd v0.1.0-3-gabc serving on http://127.0.0.1:41234 (backend docker)")
	if m == nil || m[1] != "v0.1.0-3-gabc" || m[2] != "http://127.0.0.1:41234" {
		t.Errorf("match = %q", m)
	}
	if servingLine.MatchString("admin token: /tmp/x/token") {
		t.Error("the token line matched")
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	tb := &tailBuffer{max: 8}
	_, _ = tb.Write([]byte("0123456789"))
	_, _ = tb.Write([]byte("ab"))
	if got := tb.String(); got != "456789ab" {
		t.Errorf("tail = %q", got)
	}
	if got := (&tailBuffer{max: 8}).String(); !strings.Contains(got, "no output") {
		t.Errorf("empty tail = %q", got)
	}
}
