package egresstest

import (
	"archive/zip"
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// pip installs the package and its dependency from the index into a venv,
// checking the hashes in the links, and the installed package works.
func TestPyPIWithPip(t *testing.T) {
	python := need(t, "python3")
	real := strings.TrimSpace(run(t, "", nil, python, "-c", "import sys; print(sys.executable)"))
	ca := NewCA(t)
	p := NewPyPI(t, ca, "pypi.test")

	venv := filepath.Join(t.TempDir(), "venv")
	env := hostEnv(t, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
	run(t, "", env, real, "-m", "venv", venv)
	run(t, "", env, filepath.Join(venv, "bin", "pip"), "install", "--no-cache-dir",
		"--cert", ca.PEMFile(), "--index-url", p.LoopbackURL()+"/simple/", PyPackage)

	got := strings.TrimSpace(run(t, "", env, filepath.Join(venv, "bin", "python"), "-c",
		"import sbxdemo; print(sbxdemo.greet('world'))"))
	if got != Greeting {
		t.Errorf("sbxdemo.greet('world') = %q, want %q", got, Greeting)
	}
	for _, path := range []string{"/simple/sbxdemo/", "/simple/sbxwords/",
		"/packages/sbxdemo-1.0.0-py3-none-any.whl", "/packages/sbxwords-1.0.0-py3-none-any.whl"} {
		if !requested(p.Server, "GET", path) {
			t.Errorf("pip never asked the index for %s; requests: %v", path, p.Requests())
		}
	}
}

// pip refuses a server whose CA it was not given: the TLS is real.
func TestPyPIUntrustedCA(t *testing.T) {
	python := need(t, "python3")
	real := strings.TrimSpace(run(t, "", nil, python, "-c", "import sys; print(sys.executable)"))
	p := NewPyPI(t, NewCA(t), "pypi.test")
	other := NewCA(t)
	venv := filepath.Join(t.TempDir(), "venv")
	env := hostEnv(t, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
	run(t, "", env, real, "-m", "venv", venv)
	stdout, stderr, err := runErr("", env, filepath.Join(venv, "bin", "pip"), "install", "--no-cache-dir", "--retries", "0",
		"--cert", other.PEMFile(), "--index-url", p.LoopbackURL()+"/simple/", PyPackage)
	if err == nil {
		t.Fatal("pip installed from a server whose certificate it could not verify")
	}
	if !strings.Contains(stdout+stderr, "CERTIFICATE_VERIFY_FAILED") {
		t.Errorf("pip failed, but not on the certificate:\n%s%s", stdout, stderr)
	}
	if errs := strings.Join(p.Errors(), "\n"); !strings.Contains(errs, "TLS handshake error") {
		t.Errorf("the server logged no failed handshake: %q", errs)
	}
}

// The wheel is laid out as PEP 427 says: the package, METADATA naming the
// dependency, WHEEL, and a RECORD listing every other file with its hash.
func TestWheelLayout(t *testing.T) {
	p := NewPyPI(t, NewCA(t), "pypi.test")
	data := p.Wheel("sbxdemo-1.0.0-py3-none-any.whl")
	if data == nil {
		t.Fatal("no sbxdemo wheel")
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(rc)
		rc.Close()
		files[f.Name] = b.String()
	}
	if !strings.Contains(files["sbxdemo-1.0.0.dist-info/METADATA"], "Requires-Dist: sbxwords>=1.0\n") {
		t.Errorf("METADATA does not require sbxwords: %q", files["sbxdemo-1.0.0.dist-info/METADATA"])
	}
	record := files["sbxdemo-1.0.0.dist-info/RECORD"]
	for name := range files {
		if name == "sbxdemo-1.0.0.dist-info/RECORD" {
			continue
		}
		if !strings.Contains(record, name+",sha256=") {
			t.Errorf("RECORD has no hash for %s:\n%s", name, record)
		}
	}
}
