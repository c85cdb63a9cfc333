package jail

import (
	"slices"
	"strings"
	"testing"
)

// The flags a caller renders are the spec the jail reads back.
func TestArgsRoundTrip(t *testing.T) {
	in := &Spec{UID: 900001, GID: 900001, Scratch: "/data/work/abc", ReadOnly: []string{"/data/programs/x"},
		MemoryBytes: 1 << 30, Pids: 256, CPUs: 0.5, FileBytes: 1 << 20, Fds: 2,
		Env: []string{"PYTHONUNBUFFERED=1"}, Argv: []string{"python3", "/data/programs/x/kernel.py", "--", "-x"}}
	out, init, err := Parse(in.Args())
	if err != nil || init {
		t.Fatalf("Parse(%q) = %v, init %v", in.Args(), err, init)
	}
	if out.UID != in.UID || out.Scratch != in.Scratch || !slices.Equal(out.ReadOnly, in.ReadOnly) || out.MemoryBytes != in.MemoryBytes ||
		out.Pids != in.Pids || out.CPUs != in.CPUs || out.FileBytes != in.FileBytes || out.Fds != 2 || !slices.Equal(out.Env, in.Env) || !slices.Equal(out.Argv, in.Argv) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
}

// A jail never runs its program as root, and refuses what it cannot
// confine, with an error message that names the flag.
func TestParseRefuses(t *testing.T) {
	for args, want := range map[string]string{
		"--uid 0 --gid 0 --scratch /s -- sh":          "never runs its program as root",
		"--gid 5 --scratch /s -- sh":                  "--uid and --gid must be given",
		"--uid 5 --gid 5 --scratch s -- sh":           `--scratch "s" must be a clean absolute path`,
		"--uid 5 --gid 5 --scratch / -- sh":           `--scratch "/"`,
		"--uid 5 --gid 5 --scratch /s/../t -- sh":     "clean absolute path",
		"--uid 5 --gid 5 --scratch /s":                "no program given",
		"--uid 5 --gid 5 --scratch /s --ro / -- sh":   `--ro "/"`,
		"--uid 5 --gid 5 --scratch /s --fds 99 -- sh": "--fds is 99",
		"--uid 5 --gid 5 --scratch /s --env X -- sh":  `--env "X" is not NAME=VALUE`,
		"--uid 5 --bogus -- sh":                       "flag provided but not defined: -bogus",
	} {
		_, _, err := Parse(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", args, err, want)
		}
	}
}
