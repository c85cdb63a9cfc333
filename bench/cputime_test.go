package bench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis, as a process may set.
	line := "4242 (sand box) d) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 0 0\n"
	got, err := ParseStatCPU(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := 325 * 10 * time.Millisecond; got != want {
		t.Errorf("CPU = %s, want %s (utime 250 + stime 75 ticks)", got, want)
	}
	for _, bad := range []string{"", "4242 sandboxd S 1", "1 (x) S 1 2 3"} {
		if _, err := ParseStatCPU(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestCPUTimeOfSelfGrows(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		now, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now > before {
			return
		}
	}
	t.Error("5 s of spinning did not show in this process's CPU time")
}
