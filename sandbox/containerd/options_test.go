package containerd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// These run without containerd: New refuses what it cannot work with, with
// an error message naming the fix.
func TestNewRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	agentFile := filepath.Join(dir, "sandbox-agent")
	if err := os.WriteFile(agentFile, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []Option
		is   error
		want string
	}{
		{"no agent", []Option{WithDataDir(dir)}, errdefs.ErrInvalidArgument, "make build"},
		{"agent not executable", []Option{WithAgentBinary(notExec), WithDataDir(dir)}, errdefs.ErrFailedPrecondition, "not an executable"},
		{"no data dir", []Option{WithAgentBinary(agentFile)}, errdefs.ErrInvalidArgument, "data dir"},
		{"relative data dir", []Option{WithAgentBinary(agentFile), WithDataDir("data")}, errdefs.ErrInvalidArgument, "data dir"},
		{"bad namespace", []Option{WithAgentBinary(agentFile), WithDataDir(dir), WithNamespace("a/b")}, errdefs.ErrInvalidArgument, "namespace"},
		{"no containerd", []Option{WithAgentBinary(agentFile), WithDataDir(dir), WithAddress(filepath.Join(dir, "none.sock"))}, errdefs.ErrUnavailable, "none.sock"},
	} {
		b, err := New(tc.opts...)
		if err == nil {
			b.Close()
		}
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want %v naming %q", tc.name, err, tc.is, tc.want)
		}
	}
}

func TestIDs(t *testing.T) {
	for cid, id := range map[string]string{
		"sandboxd-0123456789ab": "0123456789ab",
		"someone-elses":         "someone-elses",
		"sandboxd-":             "sandboxd-",
	} {
		if got := sandboxID(cid); got != id {
			t.Errorf("sandboxID(%q) = %q, want %q", cid, got, id)
		}
	}
	for _, bad := range []string{"", "../x", "a b", "A", strings.Repeat("a", 77)} {
		if validID(bad) {
			t.Errorf("validID(%q) = true", bad)
		}
	}
	for name, want := range map[string]string{
		"sandboxd-sandbox:latest":         "docker.io/library/sandboxd-sandbox:latest",
		"sandboxd-sandbox":                "docker.io/library/sandboxd-sandbox:latest",
		"registry.example.com/team/img:1": "registry.example.com/team/img:1",
	} {
		if got := normalize(name); got != want {
			t.Errorf("normalize(%q) = %q, want %q", name, got, want)
		}
	}
}
