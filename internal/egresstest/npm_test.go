package egresstest

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// npm installs the package and its dependency from the registry, checking
// the integrity the packument gives, and the installed package works.
func TestNPMWithNPM(t *testing.T) {
	npm := need(t, "npm")
	node := need(t, "node")
	ca := NewCA(t)
	n := NewNPM(t, ca, "npm.test")

	home := t.TempDir()
	dir := t.TempDir()
	env := hostEnv(t,
		"npm_config_userconfig="+filepath.Join(home, "npmrc"),
		"npm_config_globalconfig="+filepath.Join(home, "npmrc-global"),
		"npm_config_cache="+filepath.Join(home, "npm-cache"),
		"npm_config_update_notifier=false")
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"consumer","version":"0.0.0","private":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, env, npm, "install", "--registry", n.LoopbackURL()+"/", "--cafile", ca.PEMFile(),
		"--no-audit", "--no-fund", "--fetch-retries", "0", NPMPackage)

	got := strings.TrimSpace(run(t, dir, env, node, "-e", `console.log(require("sbx-greet").greet("world"))`))
	if got != Greeting {
		t.Errorf(`require("sbx-greet").greet("world") = %q, want %q`, got, Greeting)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Packages map[string]struct{ Integrity string } `json:"packages"`
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{NPMPackage, NPMDependency} {
		sum := sha512.Sum512(n.Tarball(name))
		want := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
		if got := l.Packages["node_modules/"+name].Integrity; got != want {
			t.Errorf("package-lock integrity of %s = %q, want the tarball's %q", name, got, want)
		}
		if !requested(n.Server, "GET", "/"+name+"/-/"+name+"-"+map[string]string{NPMPackage: NPMVersion, NPMDependency: NPMDependencyVersion}[name]+".tgz") {
			t.Errorf("npm never fetched %s's tarball; requests: %v", name, n.Requests())
		}
	}
}

// A client that dials the registry by name (as one in a sandbox does,
// through sandboxd) gets tarball URLs under that name, and the
// certificate holds for the name.
func TestNPMByName(t *testing.T) {
	ca := NewCA(t)
	n := NewNPM(t, ca, "npm.test")
	c := byName(ca, n.Server)
	resp, err := c.Get(n.RegistryURL() + NPMPackage)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Versions map[string]struct {
			Dist struct{ Tarball string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	want := n.URL() + "/sbx-greet/-/sbx-greet-1.0.0.tgz"
	if got := doc.Versions[NPMVersion].Dist.Tarball; got != want {
		t.Fatalf("tarball URL = %q, want %q", got, want)
	}
	tgz, err := c.Get(want)
	if err != nil {
		t.Fatal(err)
	}
	tgz.Body.Close()
	if tgz.StatusCode != 200 {
		t.Errorf("GET %s: %s", want, tgz.Status)
	}
}
