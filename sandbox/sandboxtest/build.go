// Package sandboxtest is the backend-agnostic test suite every sandbox
// backend runs: the same cases, through a real Manager and a real agent.
package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BuildAgent builds a static cmd/sandbox-agent into dir and returns its
// path; meant for TestMain.
func BuildAgent(dir string) (string, error) { return BuildAgentTagged(dir, "sandbox-agent", "") }

// BuildAgentTagged is BuildAgent with build tags (comma-separated) into
// dir/name, for the agents only tests may run (-tags commithook).
func BuildAgentTagged(dir, name, tags string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", out, "./cmd/sandbox-agent")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sandbox-agent: %v\n%s", err, stderr.String())
	}
	return out, nil
}
