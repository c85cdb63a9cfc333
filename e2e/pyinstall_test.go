package e2e

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// pythonInterpreter is SANDBOXD_TEST_PYTHON or python3 on PATH.
func pythonInterpreter(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SANDBOXD_TEST_PYTHON"); p != "" {
		return p
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not on PATH; install it (apt-get install python3 python3-pip python3-venv; scripts/setup.sh does) or set SANDBOXD_TEST_PYTHON")
	}
	return p
}

// TestPythonClientInstallsOffline runs the Python client's documented
// offline install, `pip install --no-index --no-build-isolation
// ./clients/python`, in a fresh virtual environment that has pip and
// nothing else (setuptools and wheel removed): the build needs only the
// standard library. No index is reachable here either way, so a build
// that asked for a package would fail. It then checks what a user would:
// the package imports from the environment with the version pyproject.toml
// declares, an editable install imports from the checkout, the sdist
// installs as well, and the checkout is left as it was.
func TestPythonClientInstallsOffline(t *testing.T) {
	python := pythonInterpreter(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "clients", "python")
	pyproject, err := os.ReadFile(filepath.Join(src, "pyproject.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version = "([^"]+)"$`).FindSubmatch(pyproject)
	if m == nil {
		t.Fatalf("%s/pyproject.toml declares no version", src)
	}
	version := string(m[1])
	before := treeFiles(t, src)

	tmp := t.TempDir()
	venv := filepath.Join(tmp, "venv")
	// The environment's own pip comes from ensurepip's bundled wheel: offline.
	mustRun(t, tmp, python, "-m", "venv", venv)
	vpy := filepath.Join(venv, "bin", "python")
	pip := func(args ...string) string {
		return mustRun(t, root, vpy, append([]string{"-m", "pip", "--disable-pip-version-check", "--no-input"}, args...)...)
	}
	pip("uninstall", "-y", "setuptools", "wheel")
	for _, mod := range []string{"setuptools", "wheel"} {
		if out, err := exec.Command(vpy, "-c", "import "+mod).CombinedOutput(); err == nil {
			t.Fatalf("%s is still importable in the environment (%s); the test must build without it", mod, out)
		}
	}

	// What a user checks after the install, from outside the checkout.
	installed := func(what string) (version, file string) {
		out := mustRun(t, tmp, vpy, "-c",
			"import importlib.metadata as m, sandboxd; print(m.version('sandboxd')); print(sandboxd.__version__); print(sandboxd.__file__)")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || lines[0] != lines[1] {
			t.Fatalf("%s: the installed metadata and sandboxd.__version__ disagree: %q", what, out)
		}
		return lines[0], lines[2]
	}

	pip("install", "--no-index", "--no-build-isolation", "./clients/python")
	v, file := installed("pip install ./clients/python")
	if v != version {
		t.Errorf("installed version %s, want %s (pyproject.toml)", v, version)
	}
	site := filepath.Dir(filepath.Dir(file))
	if !strings.HasPrefix(file, venv+string(filepath.Separator)) || filepath.Base(site) != "site-packages" {
		t.Errorf("sandboxd imports from %s, want the environment's site-packages", file)
	}
	if _, err := os.Stat(filepath.Join(site, "sandboxd", "py.typed")); err != nil {
		t.Errorf("the install has no py.typed marker: %v", err)
	}
	// pip verifies the wheel's RECORD on uninstall: every file goes.
	pip("uninstall", "-y", "sandboxd")
	if left := siteEntries(t, site, "sandboxd"); len(left) > 0 {
		t.Errorf("pip uninstall left %v in site-packages", left)
	}

	pip("install", "--no-index", "--no-build-isolation", "-e", "./clients/python")
	if v, file = installed("pip install -e ./clients/python"); v != version || !sameFile(file, filepath.Join(src, "sandboxd", "__init__.py")) {
		t.Errorf("editable install: version %s from %s, want %s from the checkout %s", v, file, version, src)
	}
	if out, err := exec.Command(vpy, "-c", "import build_backend").CombinedOutput(); err == nil {
		t.Errorf("the editable install made the checkout's build_backend importable everywhere (%s); it must expose sandboxd only", out)
	}
	pip("uninstall", "-y", "sandboxd")
	if left := siteEntries(t, site, "sandboxd"); len(left) > 0 {
		t.Errorf("pip uninstall of the editable install left %v in site-packages", left)
	}

	// The sdist, built by the backend itself, installs offline too.
	dist := filepath.Join(tmp, "dist")
	if err := os.Mkdir(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(vpy, "-c", "import sys, build_backend; print(build_backend.build_sdist(sys.argv[1]))", dist)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build_sdist: %v\n%s", err, out)
	}
	pip("install", "--no-index", "--no-build-isolation", filepath.Join(dist, strings.TrimSpace(string(out))))
	if v, _ = installed("pip install of the sdist"); v != version {
		t.Errorf("installed from the sdist: version %s, want %s", v, version)
	}

	// The build writes its wheel outside the checkout. Interpreter caches
	// (__pycache__) are left aside: some pip versions import the backend
	// with bytecode writing on, and git ignores them.
	after := treeFiles(t, src)
	var added []string
	for _, f := range after {
		if !slices.Contains(before, f) {
			added = append(added, f)
		}
	}
	if len(added) > 0 {
		t.Errorf("installing left files in the checkout: %v", added)
	}

	// The backend's own checks of the files it writes.
	cmd = exec.Command(vpy, "-m", "unittest", "-v", "tests.test_build")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python -m unittest tests.test_build: %v\n%s", err, out)
	}
}

// mustRun runs a command in dir with a deadline and returns its output,
// failing the test with that output when it fails.
func mustRun(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// treeFiles lists the files under dir, outside __pycache__ folders.
func treeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "__pycache__" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// siteEntries are the entries of site-packages whose names mention name.
func siteEntries(t *testing.T, site, name string) []string {
	t.Helper()
	ents, err := os.ReadDir(site)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), name) {
			out = append(out, e.Name())
		}
	}
	return out
}

// sameFile reports whether a and b name one file, through any symlinks.
func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
