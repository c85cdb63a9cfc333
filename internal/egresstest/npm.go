package egresstest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// The npm packages NPM serves: NPMPackage depends on NPMDependency.
const (
	NPMPackage           = "sbx-greet"
	NPMVersion           = "1.0.0"
	NPMDependency        = "sbx-words"
	NPMDependencyVersion = "1.2.0"
)

// NPM is an npm registry serving NPMPackage and NPMDependency as real
// tarballs built when it starts:
//
//	/<name>                   the packument (every version's manifest)
//	/<name>/-/<name>-<v>.tgz  a tarball
//
// A packument's tarball URLs name the host the request was sent to (its
// Host header), so that they lead back here whether the client dialled
// 127.0.0.1 or the server's name through a proxy.
type NPM struct {
	*Server
	pkgs map[string]npmPackage
}

type npmPackage struct {
	manifest map[string]any // package.json
	tarball  []byte
}

// NewNPM starts a registry under name (for example "npm.test"), closed at
// t's cleanup.
func NewNPM(t testing.TB, ca *CA, name string, opts ...Option) *NPM {
	t.Helper()
	n := &NPM{pkgs: map[string]npmPackage{}}
	words := map[string]any{"name": NPMDependency, "version": NPMDependencyVersion, "main": "index.js",
		"description": "A word for sbx-greet, served by sandboxd's test registry", "license": "MIT"}
	greet := map[string]any{"name": NPMPackage, "version": NPMVersion, "main": "index.js",
		"description": "A greeting, served by sandboxd's test registry", "license": "MIT",
		"dependencies": map[string]string{NPMDependency: "^" + NPMDependencyVersion}}
	for _, p := range []struct {
		manifest map[string]any
		index    string
	}{
		{words, "'use strict';\nexports.hello = 'Hello';\n"},
		{greet, "'use strict';\nconst { hello } = require('sbx-words');\nexports.greet = (name) => `${hello}, ${name}!`;\n"},
	} {
		tgz, err := npmTarball(p.manifest, p.index)
		if err != nil {
			t.Fatal(err)
		}
		n.pkgs[p.manifest["name"].(string)] = npmPackage{manifest: p.manifest, tarball: tgz}
	}
	n.Server = start(t, ca, name, http.HandlerFunc(n.serve), opts)
	return n
}

// RegistryURL is "https://name:PORT/", npm's --registry.
func (n *NPM) RegistryURL() string { return n.URL() + "/" }

// Tarball is the named package's tarball, or nil.
func (n *NPM) Tarball(name string) []byte { return n.pkgs[name].tarball }

func (n *NPM) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		notFound(w, r.Method+" "+r.URL.Path)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	if name, file, ok := strings.Cut(path, "/-/"); ok {
		p, known := n.pkgs[name]
		if !known || file != fmt.Sprintf("%s-%s.tgz", name, p.manifest["version"]) {
			notFound(w, "tarball "+path)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(p.tarball)))
		w.Write(p.tarball)
		return
	}
	p, ok := n.pkgs[path]
	if !ok {
		notFound(w, "package "+path)
		return
	}
	host := r.Host
	if host == "" {
		host = n.HostPort()
	}
	body, err := json.Marshal(packument(p, "https://"+host))
	if err != nil {
		http.Error(w, "egresstest: encode the packument: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// packument is the registry document for p, its tarball served at base.
func packument(p npmPackage, base string) map[string]any {
	name, version := p.manifest["name"].(string), p.manifest["version"].(string)
	sha := sha1.Sum(p.tarball)
	sum := sha512.Sum512(p.tarball)
	v := map[string]any{}
	for k, x := range p.manifest {
		v[k] = x
	}
	v["_id"] = name + "@" + version
	v["dist"] = map[string]any{
		"tarball":   fmt.Sprintf("%s/%s/-/%s-%s.tgz", base, name, name, version),
		"shasum":    hex.EncodeToString(sha[:]),
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
	}
	when := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	return map[string]any{
		"_id":       name,
		"name":      name,
		"dist-tags": map[string]string{"latest": version},
		"versions":  map[string]any{version: v},
		"time":      map[string]string{"created": when, "modified": when, version: when},
	}
}

// npmTarball is the gzipped tar npm publishes: package/package.json and
// package/index.js.
func npmTarball(manifest map[string]any, index string) ([]byte, error) {
	pj, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("egresstest: encode package.json: %w", err)
	}
	files := map[string][]byte{"package/package.json": append(pj, '\n'), "package/index.js": []byte(index)}
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	mtime := time.Date(1985, 10, 26, 8, 15, 0, 0, time.UTC) // npm's own fixed tarball time
	for _, name := range names {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(files[name])), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("egresstest: build a tarball: %w", err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			return nil, fmt.Errorf("egresstest: build a tarball: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("egresstest: build a tarball: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("egresstest: build a tarball: %w", err)
	}
	return buf.Bytes(), nil
}
