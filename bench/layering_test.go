package bench

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const module = "github.com/sandboxd/sandboxd/"

// TestLayering keeps benchmark programs out of the library folders: the
// tools and the backends are libraries that sandboxd assembles, so a tool
// that pulls in a backend or the HTTP API (as the benchmarks once did from
// tools/lsp/lspbench) runs an import back up the layers. Benchmark commands
// live in cmd/, their shared code here. Packages whose name ends in
// "test" serve tests only and are exempt.
func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	for _, rule := range []struct {
		pkgs      string
		forbidden []string
	}{
		{"./tools/...", []string{"api", "sandbox/docker", "sandbox/containerd", "sandbox/kubernetes"}},
		{"./sandbox/...", []string{"api"}},
	} {
		for pkg, deps := range depsOf(t, rule.pkgs) {
			if strings.HasSuffix(pkg, "test") {
				// Test-support packages (tools/toolstest, sandbox/sandboxtest)
				// are imported by tests only and may drive a real backend.
				continue
			}
			for _, d := range deps {
				for _, f := range rule.forbidden {
					if d == module+f || strings.HasPrefix(d, module+f+"/") {
						t.Errorf("%s imports %s (directly or through its imports); a library under %s must not depend on it: put the code that needs it under cmd/ (benchmarks: cmd/*bench, shared code in bench/)", pkg, d, strings.TrimSuffix(strings.TrimPrefix(rule.pkgs, "./"), "/..."))
					}
				}
			}
		}
	}
	for pkg, name := range namesOf(t, "./tools/...", "./sandbox/...") {
		if name == "main" {
			t.Errorf("%s is a command under a library folder; move it under cmd/", pkg)
		}
	}
}

// goList runs `go list` from the repository root (this package's parent).
func goList(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// depsOf maps each package of pattern to its transitive non-test imports.
func depsOf(t *testing.T, pattern string) map[string][]string {
	out := goList(t, "-f", `{{.ImportPath}} {{join .Deps " "}}`, pattern)
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			got[f[0]] = f[1:]
		}
	}
	if len(got) == 0 {
		t.Fatalf("go list %s listed no packages", pattern)
	}
	return got
}

func namesOf(t *testing.T, patterns ...string) map[string]string {
	out := goList(t, append([]string{"-f", "{{.ImportPath}} {{.Name}}"}, patterns...)...)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			got[f[0]] = f[1]
		}
	}
	return got
}
