package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// A bad section of any part of the config stops serve before anything is
// opened or written (no token file, no data dir, no backend) with one
// message shape: "config FILE: key.path: what is wrong; what to do".
func TestBadSectionFailsBeforeAnythingOpens(t *testing.T) {
	for _, tc := range []struct{ name, yaml, key string }{
		{"lsp", "lsp:\n  servers:\n    - {language: zig, extensions: [.zig], root_markers: [build.zig]}\n", "lsp.servers[0].command"},
		{"eval", "eval:\n  max_output_bytes: 10\n", "eval.max_output_bytes"},
		{"debug", "debug:\n  session_ttl: -5m\n", "debug.session_ttl"},
		{"questions", "questions:\n  default_expiry: 2h\n  max_expiry: 1h\n", "questions.default_expiry"},
		{"kubernetes", "kubernetes:\n  image_pull_policy: Sometimes\n", "kubernetes.image_pull_policy"},
		{"containerd", "containerd:\n  address: relative.sock\n", "containerd.address"},
		{"core", "idle_ttl: -1s\n", "idle_ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "sandboxd.yaml")
			if err := os.WriteFile(cfgPath, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			dataDir := filepath.Join(dir, "data")
			// The docker backend would open an engine client: it must not
			// get that far.
			code, _, stderr := runCLI(t, "", "serve", "--config", cfgPath, "--data-dir", dataDir, "--backend", "docker", "--listen", "127.0.0.1:0")
			if code != 1 {
				t.Fatalf("serve exited %d, want 1: %s", code, stderr)
			}
			shape := regexp.MustCompile(`^sandboxd: config ` + regexp.QuoteMeta(cfgPath) + `: ` + regexp.QuoteMeta(tc.key) + `: [^;]+; .+\n$`)
			if !shape.MatchString(stderr) {
				t.Errorf("error message %q is not of the shape \"config FILE: %s: what is wrong; what to do\"", stderr, tc.key)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("the data dir was created (%v) before the config was found bad", err)
			}
		})
	}
}
