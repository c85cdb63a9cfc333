package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// helpCommands are every command line that asks for help.
var helpCommands = [][]string{
	{"help"}, {"-h"}, {"--help"}, {"-help"},
	{"serve", "--help"}, {"serve", "-h"},
	{"sandbox", "--help"}, {"sandbox", "-h"}, {"sandbox", "help"},
	{"sandbox", "create", "--help"}, {"sandbox", "list", "-h"}, {"sandbox", "get", "--help"}, {"sandbox", "delete", "--help"},
	{"run", "--help"}, {"run", "help"},
	{"run", "create", "--help"}, {"run", "list", "--help"}, {"run", "get", "-h"}, {"run", "delete", "--help"},
	{"tools", "--help"}, {"call", "--help"}, {"call", "-h"},
	{"token", "--help"}, {"token", "new", "--help"},
	{"audit", "--help"}, {"audit", "verify", "--help"},
	{"help", "run", "create"}, {"help", "sandbox"},
	// Help wins over what else is on the line.
	{"run", "create", "--conversation", "c1", "--help"},
}

// TestHelpExitsZero: every --help prints usage on stdout, nothing on
// stderr, and exits 0, so `sandboxd X --help | less` works and scripts
// can tell help from a mistake.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range helpCommands {
		code, out, errs := runCLI(t, "", args...)
		if code != 0 || errs != "" || !strings.Contains(out, "usage") && !strings.Contains(out, "Usage") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want usage on stdout and exit 0", args, code, out, errs)
		}
	}
	// A subcommand's help names its own flags.
	if _, out, _ := runCLI(t, "", "run", "create", "--help"); !strings.Contains(out, "-conversation") || !strings.Contains(out, "-json") {
		t.Errorf("run create --help does not list its flags:\n%s", out)
	}
	if _, out, _ := runCLI(t, "", "serve", "--help"); !strings.Contains(out, "-listen") {
		t.Errorf("serve --help does not list its flags:\n%s", out)
	}
}

// TestHelpBinary runs the built binary: os.Exit sees the same status.
func TestHelpBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// make test builds bin/sandboxd once and names it; else build one here.
	bin := os.Getenv("SANDBOXD_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "sandboxd")
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			t.Fatalf("go build: %v", err)
		}
	}
	for _, args := range helpCommands {
		var out, errb strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || errb.Len() > 0 || out.Len() == 0 {
			t.Errorf("sandboxd %s: %v, stdout %d bytes, stderr %q", strings.Join(args, " "), err, out.Len(), errb.String())
		}
	}
	cmd := exec.Command(bin, "run", "create")
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("sandboxd run create (no conversation): %v, want exit status 2", err)
	}
}
