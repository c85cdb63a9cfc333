package egresstest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Greeting is what every served package's greet function answers for
// "world"; the word "Hello" comes from the package's dependency, so seeing
// it proves the dependency was fetched too.
const Greeting = "Hello, world!"

// The Python distributions PyPI serves: PyPackage depends on PyDependency.
const (
	PyPackage    = "sbxdemo"
	PyDependency = "sbxwords"
	PyVersion    = "1.0.0"
)

// PyPI is a PEP 503 "simple" package index serving PyPackage and
// PyDependency as real wheels built when it starts, with links carrying
// each wheel's sha256 so that pip checks what it downloaded:
//
//	/simple/                      the projects
//	/simple/<project>/            a project's files
//	/packages/<wheel file name>   a wheel
type PyPI struct {
	*Server
	wheels map[string][]byte   // by file name
	files  map[string][]string // a normalized project's wheel file names
}

// NewPyPI starts an index under name (for example "pypi.test"), closed at
// t's cleanup.
func NewPyPI(t testing.TB, ca *CA, name string, opts ...Option) *PyPI {
	t.Helper()
	p := &PyPI{wheels: map[string][]byte{}, files: map[string][]string{}}
	for _, d := range pyDists() {
		file, data, err := buildWheel(d)
		if err != nil {
			t.Fatal(err)
		}
		p.wheels[file] = data
		p.files[normalizePy(d.name)] = append(p.files[normalizePy(d.name)], file)
	}
	p.Server = start(t, ca, name, http.HandlerFunc(p.serve), opts)
	return p
}

// IndexURL is "https://name:PORT/simple/", pip's --index-url.
func (p *PyPI) IndexURL() string { return p.URL() + "/simple/" }

// Wheel is the named wheel file's bytes, or nil.
func (p *PyPI) Wheel(file string) []byte { return p.wheels[file] }

func (p *PyPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "egresstest: the index answers GET only", http.StatusMethodNotAllowed)
		return
	}
	path := r.URL.Path
	switch {
	case path == "/simple" || path == "/simple/":
		var names []string
		for n := range p.files {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		b.WriteString("<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>Simple index</title></head><body>\n")
		for _, n := range names {
			fmt.Fprintf(&b, "<a href=\"/simple/%s/\">%s</a>\n", n, html.EscapeString(n))
		}
		b.WriteString("</body></html>\n")
		writeHTML(w, b.String())
	case strings.HasPrefix(path, "/simple/"):
		project := strings.Trim(strings.TrimPrefix(path, "/simple/"), "/")
		files, ok := p.files[normalizePy(project)]
		if !ok || strings.Contains(project, "/") {
			notFound(w, "project "+project)
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>Links for %s</title></head><body>\n", html.EscapeString(project))
		for _, f := range files {
			sum := sha256.Sum256(p.wheels[f])
			fmt.Fprintf(&b, "<a href=\"/packages/%s#sha256=%s\">%s</a>\n", f, hex.EncodeToString(sum[:]), f)
		}
		b.WriteString("</body></html>\n")
		writeHTML(w, b.String())
	case strings.HasPrefix(path, "/packages/"):
		data, ok := p.wheels[strings.TrimPrefix(path, "/packages/")]
		if !ok {
			notFound(w, "file "+path)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data)
	default:
		notFound(w, path)
	}
}

func writeHTML(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(body))
}

var pySeparators = regexp.MustCompile(`[-_.]+`)

// normalizePy is a project name as PEP 503 compares it.
func normalizePy(name string) string {
	return strings.ToLower(pySeparators.ReplaceAllString(name, "-"))
}

// pyDist is one distribution to build as a wheel.
type pyDist struct {
	name, version string
	requires      []string          // Requires-Dist lines
	files         map[string]string // the package's files by path in the wheel
}

func pyDists() []pyDist {
	return []pyDist{
		{name: PyDependency, version: PyVersion, files: map[string]string{
			PyDependency + "/__init__.py": `"""A word for sbxdemo, served by sandboxd's test package index."""

HELLO: str = "Hello"
`,
			PyDependency + "/py.typed": "",
		}},
		{name: PyPackage, version: PyVersion, requires: []string{PyDependency + ">=1.0"}, files: map[string]string{
			PyPackage + "/__init__.py": `"""A greeting, served by sandboxd's test package index."""

from sbxwords import HELLO


def greet(name: str) -> str:
    """Return the greeting for name."""
    return f"{HELLO}, {name}!"
`,
			PyPackage + "/py.typed": "",
		}},
	}
}

// buildWheel makes d's wheel (PEP 427): its files, then a .dist-info with
// METADATA, WHEEL and a RECORD of every file's sha256 and size.
func buildWheel(d pyDist) (file string, data []byte, err error) {
	info := fmt.Sprintf("%s-%s.dist-info", d.name, d.version)
	contents := map[string]string{}
	for k, v := range d.files {
		contents[k] = v
	}
	var meta strings.Builder
	fmt.Fprintf(&meta, "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: A test package of sandboxd's egress tests\nRequires-Python: >=3.8\n", d.name, d.version)
	for _, r := range d.requires {
		fmt.Fprintf(&meta, "Requires-Dist: %s\n", r)
	}
	contents[info+"/METADATA"] = meta.String()
	contents[info+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: egresstest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	paths := make([]string, 0, len(contents))
	for k := range contents {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	var record strings.Builder
	for _, p := range paths {
		sum := sha256.Sum256([]byte(contents[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(contents[p]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", info)
	contents[info+"/RECORD"] = record.String()
	paths = append(paths, info+"/RECORD")

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range paths {
		f, err := zw.Create(p)
		if err != nil {
			return "", nil, fmt.Errorf("egresstest: build the %s wheel: %w", d.name, err)
		}
		if _, err := f.Write([]byte(contents[p])); err != nil {
			return "", nil, fmt.Errorf("egresstest: build the %s wheel: %w", d.name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return "", nil, fmt.Errorf("egresstest: build the %s wheel: %w", d.name, err)
	}
	return fmt.Sprintf("%s-%s-py3-none-any.whl", d.name, d.version), buf.Bytes(), nil
}
