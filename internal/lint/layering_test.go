package lint

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const module = "github.com/sandboxd/sandboxd/"

// engines are the sandbox engines' backends, the packages sandboxd
// assembles from below.
var engines = []string{"sandbox/docker", "sandbox/containerd", "sandbox/kubernetes", "sandbox/host"}

// A rule forbids the packages of a pattern to import some packages of the
// module, directly or through their imports (test files do not count).
type rule struct {
	pkgs      string   // a go list pattern, from the module's root
	forbidden []string // module-relative paths, each with its subpackages
	// helpers holds the rule for the test-support packages under pkgs too
	// (named *test, imported by tests only), which are otherwise exempt.
	helpers bool
	fix     string // what to do instead, for the error message
}

// rules keep the libraries one-way: the tools and the backends are
// libraries that sandboxd assembles, so a tool that pulls in a backend or
// the HTTP API (as the benchmarks once did from tools/lsp/lspbench) runs
// an import back up the layers. Benchmark commands live in cmd/, their
// shared code in bench/. Test-support packages may drive a real backend,
// except the tools' shared harness: a tool's tests pick the engine they
// run on, the harness takes any sandbox.Backend.
var rules = []rule{
	{pkgs: "./tools/...", forbidden: append([]string{"api"}, engines...),
		fix: "put the code that needs it under cmd/ (benchmarks: cmd/*bench, shared code in bench/)"},
	{pkgs: "./sandbox/...", forbidden: []string{"api"},
		fix: "put the code that needs it under cmd/ (benchmarks: cmd/*bench, shared code in bench/)"},
	{pkgs: "./tools/toolstest/...", forbidden: engines, helpers: true,
		fix: "take a sandbox.Backend from the test instead, which opens its engine itself (sandbox/docker/dockertest)"},
}

func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go command is not on PATH; the layering check needs it to list the packages' imports")
	}
	for _, r := range rules {
		for _, v := range r.violations(depsOf(t, r.pkgs)) {
			t.Error(v)
		}
	}
	for pkg, name := range namesOf(t, "./tools/...", "./sandbox/...") {
		if name == "main" {
			t.Errorf("%s is a command under a library folder; move it under cmd/", pkg)
		}
	}
}

// violations are r's error messages for deps, each package's transitive
// imports by its import path; packages outside r.pkgs are left alone.
func (r rule) violations(deps map[string][]string) []string {
	dir := strings.TrimSuffix(strings.TrimPrefix(r.pkgs, "./"), "/...")
	var out []string
	for pkg, imports := range deps {
		if pkg != module+dir && !strings.HasPrefix(pkg, module+dir+"/") {
			continue
		}
		if !r.helpers && strings.HasSuffix(pkg, "test") {
			continue
		}
		for _, d := range imports {
			for _, f := range r.forbidden {
				if d == module+f || strings.HasPrefix(d, module+f+"/") {
					out = append(out, fmt.Sprintf("%s imports %s (directly or through its imports); a package under %s must not depend on it: %s",
						pkg, d, dir, r.fix))
				}
			}
		}
	}
	return out
}

// The rules' logic on made-up imports, so that a rule that could never
// fire is caught here rather than trusted.
func TestRulesFire(t *testing.T) {
	deps := map[string][]string{
		module + "tools/files":           {module + "tools", module + "sandbox"},
		module + "tools/lsp":             {module + "api/openapi"},
		module + "tools/files/filestest": {module + "sandbox/docker"},
		module + "tools/toolstest":       {module + "sandbox/host"},
		module + "tools/eval":            {module + "sandbox/dockerish"},
		module + "sandbox/docker":        {module + "api"},
		module + "sandbox/sandboxtest":   {module + "api"},
	}
	got := map[string]int{}
	for _, r := range rules {
		for _, v := range r.violations(deps) {
			got[strings.Fields(v)[0]]++
		}
	}
	want := map[string]int{
		module + "tools/lsp":       1, // api's subpackage
		module + "tools/toolstest": 1, // the harness and an engine: only the harness's own rule
		module + "sandbox/docker":  1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("violations per package = %v, want %v (a tool may import sandbox; a test helper other than toolstest may import an engine; sandbox/dockerish is no engine; sandbox's test helpers are exempt)", got, want)
	}
}

// goList runs `go list` from the module's root (two folders up).
func goList(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
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
