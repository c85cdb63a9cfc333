package egresstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goClientEnv is the environment for the go command on the host: the
// proxy's Env (at its loopback address), the CA trusted through
// SSL_CERT_FILE, and a module cache of the test's own.
func goClientEnv(t *testing.T, ca *CA, g *GoProxy, goBin string) []string {
	cache := strings.TrimSpace(run(t, "", nil, goBin, "env", "GOCACHE"))
	gopath := t.TempDir()
	env := hostEnv(t, "SSL_CERT_FILE="+ca.PEMFile(), "GOPATH="+gopath,
		"GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"),
		"GOFLAGS=-modcacherw", // so that the test's cleanup can remove the cache
		"GOCACHE="+cache)      // the host's build cache, so that the standard library is not rebuilt
	for _, e := range g.Env() {
		if strings.HasPrefix(e, "GOPROXY=") {
			e = "GOPROXY=" + g.LoopbackURL()
		}
		env = append(env, e)
	}
	return env
}

// A module whose go.sum is missing (what a sandbox sees of a project
// freshly cloned) fetches its dependencies from the proxy, after which
// `go build` and `go vet` are clean and the program prints the greeting
// made of both modules: with `go mod tidy` first, or with -mod=mod, which
// lets go build fill go.sum itself.
func TestGoProxyWithGo(t *testing.T) {
	goBin := need(t, "go")
	ca := NewCA(t)
	g := NewGoProxy(t, ca, "goproxy.test")
	for _, c := range []struct {
		name  string
		prep  [][]string
		flags string
	}{
		{"tidy", [][]string{{"mod", "tidy"}}, "-modcacherw"},
		{"mod=mod", nil, "-modcacherw -mod=mod"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append(goClientEnv(t, ca, g, goBin), "GOFLAGS="+c.flags)
			dir := t.TempDir()
			if err := WriteGoConsumer(dir); err != nil {
				t.Fatal(err)
			}
			if c.flags == "-modcacherw" {
				_, stderr, err := runErr(dir, env, goBin, "build", "./...")
				if err == nil || !strings.Contains(stderr, "missing go.sum entry") {
					t.Fatalf("go build before any download: %v: %s; want the missing go.sum entry a fresh sandbox sees", err, stderr)
				}
			}
			for _, args := range c.prep {
				run(t, dir, env, goBin, args...)
			}
			run(t, dir, env, goBin, "build", "-o", "consumer", ".")
			run(t, dir, env, goBin, "vet", "./...")
			if got := strings.TrimSpace(run(t, dir, env, filepath.Join(dir, "consumer"))); got != Greeting {
				t.Errorf("the consumer printed %q, want %q", got, Greeting)
			}
			sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{GoModule + " " + GoVersion + " h1:", GoDependency + " " + GoDependencyVersion + " h1:",
				GoModule + " " + GoVersion + "/go.mod h1:"} {
				if !strings.Contains(string(sum), line) {
					t.Errorf("go.sum has no %q line:\n%s", line, sum)
				}
			}
		})
	}
	for _, path := range []string{"/example.test/greet/@v/v1.0.0.zip", "/example.test/words/@v/v1.2.0.zip", "/example.test/words/@v/v1.2.0.mod"} {
		if !requested(g.Server, "GET", path) {
			t.Errorf("go never fetched %s; requests: %v", path, g.Requests())
		}
	}
}

// `go get` of the module at latest resolves it through @latest or the
// version list, and `go mod tidy` adds the dependency.
func TestGoProxyLatest(t *testing.T) {
	goBin := need(t, "go")
	ca := NewCA(t)
	g := NewGoProxy(t, ca, "goproxy.test")
	env := goClientEnv(t, ca, g, goBin)
	dir := t.TempDir()
	files := GoConsumerFiles()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(files["main.go"]), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, env, goBin, "mod", "init", GoConsumerModule)
	run(t, dir, env, goBin, "get", GoModule+"@latest")
	run(t, dir, env, goBin, "mod", "tidy")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{GoModule + " " + GoVersion, GoDependency + " " + GoDependencyVersion + " // indirect"} {
		if !strings.Contains(string(mod), want) {
			t.Errorf("go.mod has no %q:\n%s", want, mod)
		}
	}
	if got := strings.TrimSpace(run(t, dir, env, goBin, "run", ".")); got != Greeting {
		t.Errorf("go run printed %q, want %q", got, Greeting)
	}
}

func TestUnescapeModule(t *testing.T) {
	for in, want := range map[string]string{"example.test/greet": "example.test/greet", "github.com/!azure/x": "github.com/Azure/x"} {
		if got, err := unescapeModule(in); err != nil || got != want {
			t.Errorf("unescapeModule(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"github.com/Azure/x", "a/!1", "a/b!"} {
		if _, err := unescapeModule(bad); err == nil {
			t.Errorf("unescapeModule(%q) accepted a badly escaped path", bad)
		}
	}
}
