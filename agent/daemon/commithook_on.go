//go:build commithook

package daemon

import (
	"os"
	"path/filepath"
	"strings"
)

// CommitHookEnv names the directory through which a crash test stops this
// agent inside a commit. Built only with -tags commithook: the production
// agent has no such hook.
//
// At every step of a commit on another root, the hook reads DIR/stop; when
// it names this step ("planned", "staged", "committed", "applied:N",
// "synced", "cleaned", "done"), it writes DIR/reached and blocks the commit
// for good, so the test can kill the agent exactly there.
const CommitHookEnv = "SANDBOXD_AGENT_COMMIT_HOOK"

func commitPoint(root, point string) {
	dir := os.Getenv(CommitHookEnv)
	if dir == "" {
		return
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil && d == root {
		return
	}
	stop, err := os.ReadFile(filepath.Join(dir, "stop"))
	if err != nil || strings.TrimSpace(string(stop)) != point {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "reached"), []byte(point), 0o644); err != nil {
		return
	}
	select {} // until the test kills the agent
}
