package bench

import (
	"fmt"
	"strings"
	"testing"
)

func TestContent(t *testing.T) {
	c := Content(4096)
	if len(c) != 4096 {
		t.Fatalf("len = %d", len(c))
	}
	lines := Lines(c)
	if len(lines) != 64 {
		t.Fatalf("%d lines, want 64", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if len(l) != 63 || seen[l] {
			t.Fatalf("line %q is not 63 bytes or repeats", l)
		}
		seen[l] = true
	}
	if odd := Content(100); len(odd) != 100 {
		t.Errorf("Content(100) has %d bytes", len(odd))
	}
}

// numbered renders lines the way a read tool might: a number, a tab, the line.
func numbered(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, l)
	}
	return b.String()
}

func TestCheckNumbered(t *testing.T) {
	want := Lines(Content(4096))
	if err := CheckNumbered("bench.txt (64 lines)\n"+numbered(want), want); err != nil {
		t.Errorf("a complete answer was refused: %v", err)
	}
	missing := append(append([]string{}, want[:10]...), want[11:]...)
	swapped := append([]string{}, want...)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	for name, text := range map[string]string{
		"empty":           "",
		"a line missing":  numbered(missing),
		"lines swapped":   numbered(swapped),
		"cut with a note": numbered(want) + "... 12 more lines\n",
		"only the first":  numbered(want[:1]),
	} {
		if err := CheckNumbered(text, want); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
