package egresstest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The Go modules GoProxy serves: GoModule requires GoDependency.
const (
	GoModule            = "example.test/greet"
	GoVersion           = "v1.0.0"
	GoDependency        = "example.test/words"
	GoDependencyVersion = "v1.2.0"
	// GoConsumerModule is the module WriteGoConsumer writes.
	GoConsumerModule = "example.test/consumer"
	// GoNoSumDB is the GONOSUMDB pattern that keeps go from asking the
	// checksum database about the served modules.
	GoNoSumDB = "example.test"
)

// GoProxy is a Go module proxy (the GOPROXY protocol) serving GoModule and
// GoDependency, their zips built when it starts:
//
//	/<module>/@v/list               the versions
//	/<module>/@v/<version>.info     {"Version", "Time"}
//	/<module>/@v/<version>.mod      the go.mod
//	/<module>/@v/<version>.zip      the module zip
//	/<module>/@latest               the latest version's .info
//
// Anything else answers 404, which go takes for "no such module here".
type GoProxy struct {
	*Server
	mods map[string]goModule // by module path
}

type goModule struct {
	path, version string
	gomod         string
	zip           []byte
}

// NewGoProxy starts a module proxy under name (for example
// "goproxy.test"), closed at t's cleanup.
func NewGoProxy(t testing.TB, ca *CA, name string, opts ...Option) *GoProxy {
	t.Helper()
	g := &GoProxy{mods: map[string]goModule{}}
	for _, m := range []struct {
		path, version, gomod string
		files                map[string]string
	}{
		{GoDependency, GoDependencyVersion, "module " + GoDependency + "\n\ngo 1.21\n", map[string]string{
			"words.go": "// Package words holds the word greet begins with.\npackage words\n\n// Hello is the first word of a greeting.\nconst Hello = \"Hello\"\n",
		}},
		{GoModule, GoVersion, "module " + GoModule + "\n\ngo 1.21\n\nrequire " + GoDependency + " " + GoDependencyVersion + "\n", map[string]string{
			"greet.go": "// Package greet greets.\npackage greet\n\nimport \"" + GoDependency + "\"\n\n// Greet is the greeting for name.\nfunc Greet(name string) string {\n\treturn words.Hello + \", \" + name + \"!\"\n}\n",
		}},
	} {
		data, err := goModZip(m.path, m.version, m.gomod, m.files)
		if err != nil {
			t.Fatal(err)
		}
		g.mods[m.path] = goModule{path: m.path, version: m.version, gomod: m.gomod, zip: data}
	}
	g.Server = start(t, ca, name, http.HandlerFunc(g.serve), opts)
	return g
}

// ProxyURL is "https://name:PORT", the value of GOPROXY.
func (g *GoProxy) ProxyURL() string { return g.URL() }

// Env is the environment go needs in a sandbox to fetch the served
// modules: GOPROXY, GONOSUMDB (the checksum database knows nothing of
// them) and GOTOOLCHAIN=local (no toolchain download is tried). Run
// `go mod tidy` before building, or add GOFLAGS=-mod=mod, so that go.sum
// gets the modules' lines.
func (g *GoProxy) Env() []string {
	return []string{"GOPROXY=" + g.ProxyURL(), "GONOSUMDB=" + GoNoSumDB, "GOTOOLCHAIN=local"}
}

// Zip is the module zip of the named module, or nil.
func (g *GoProxy) Zip(module string) []byte { return g.mods[module].zip }

var goModTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func (g *GoProxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		notFound(w, r.Method+" "+r.URL.Path)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	var module, file string
	if m, ok := strings.CutSuffix(path, "/@latest"); ok {
		module, file = m, "@latest"
	} else if m, f, ok := strings.Cut(path, "/@v/"); ok {
		module, file = m, f
	} else {
		notFound(w, r.URL.Path)
		return
	}
	module, err := unescapeModule(module)
	if err != nil {
		http.Error(w, "egresstest: "+err.Error(), http.StatusBadRequest)
		return
	}
	m, ok := g.mods[module]
	if !ok {
		notFound(w, "module "+module)
		return
	}
	info := func() {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"Version": m.version, "Time": goModTime.Format(time.RFC3339)})
	}
	switch file {
	case "list":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, m.version)
	case "@latest", m.version + ".info":
		info()
	case m.version + ".mod":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, m.gomod)
	case m.version + ".zip":
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Length", fmt.Sprint(len(m.zip)))
		w.Write(m.zip)
	default:
		notFound(w, module+" "+file)
	}
}

// unescapeModule undoes the proxy protocol's case encoding ("!x" for "X").
func unescapeModule(p string) (string, error) {
	var b strings.Builder
	bang := false
	for _, r := range p {
		switch {
		case bang && 'a' <= r && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			bang = false
		case bang:
			return "", fmt.Errorf("module path %q has '!' before a character that is not a lower-case letter", p)
		case r == '!':
			bang = true
		case 'A' <= r && r <= 'Z':
			return "", fmt.Errorf("module path %q has an upper-case letter that is not escaped as !%c", p, r-'A'+'a')
		default:
			b.WriteRune(r)
		}
	}
	if bang {
		return "", fmt.Errorf("module path %q ends in '!'", p)
	}
	return b.String(), nil
}

// goModZip is a module zip as the go command expects it: every file under
// "<module>@<version>/", go.mod among them, no directory entries.
func goModZip(module, version, gomod string, files map[string]string) ([]byte, error) {
	all := map[string]string{"go.mod": gomod}
	for k, v := range files {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: module + "@" + version + "/" + n, Method: zip.Deflate, Modified: goModTime})
		if err != nil {
			return nil, fmt.Errorf("egresstest: build the %s zip: %w", module, err)
		}
		if _, err := f.Write([]byte(all[n])); err != nil {
			return nil, fmt.Errorf("egresstest: build the %s zip: %w", module, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("egresstest: build the %s zip: %w", module, err)
	}
	return buf.Bytes(), nil
}

// GoConsumerFiles are the files of a module that uses GoModule: its
// go.mod lists both served modules (so that it is tidy and only go.sum is
// missing, as for a project freshly cloned into a sandbox), and main.go
// prints greet.Greet("world"), which is Greeting.
func GoConsumerFiles() map[string]string {
	return map[string]string{
		"go.mod": "module " + GoConsumerModule + "\n\ngo 1.21\n\nrequire " + GoModule + " " + GoVersion + "\n\nrequire " +
			GoDependency + " " + GoDependencyVersion + " // indirect\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + GoModule + "\"\n)\n\nfunc main() {\n\tfmt.Println(greet.Greet(\"world\"))\n}\n",
	}
}

// WriteGoConsumer writes GoConsumerFiles into dir, which must exist.
func WriteGoConsumer(dir string) error {
	for name, text := range GoConsumerFiles() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("egresstest: write the Go consumer module: %w", err)
		}
	}
	return nil
}
