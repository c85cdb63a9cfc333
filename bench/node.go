package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// npmWait bounds one npm ci.
const npmWait = 5 * time.Minute

// InstallNodeModules runs `npm ci` in dir unless its node_modules was
// installed from the same package-lock.json (a stamp of the lockfile's
// hash is kept in node_modules); npm's downloads are cached in the user's
// cache dir between runs.
func InstallNodeModules(ctx context.Context, dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("the lockfile of %s: %w", dir, err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".sandboxd-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == want {
		return nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return fmt.Errorf("npm is not on PATH; install Node.js 20 or later")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	ctx, cancel := context.WithTimeout(ctx, npmWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(cache, "sandboxd-e2e", "npm"))
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return os.WriteFile(stamp, []byte(want+"\n"), 0o644)
}
