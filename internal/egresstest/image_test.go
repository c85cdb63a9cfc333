package egresstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The sandbox image's own clients (older pip and npm than the host's)
// fetch from the servers by name, trusting the CA through a bundle file.
// The container shares the host's network and maps the names to
// 127.0.0.1, standing in for sandboxd's proxy; it runs only with
// SANDBOXD_TEST_DOCKER=1 and the image in SANDBOXD_TEST_IMAGE.
func TestImageClients(t *testing.T) {
	image := os.Getenv("SANDBOXD_TEST_IMAGE")
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" || image == "" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 and SANDBOXD_TEST_IMAGE to try the sandbox image's clients")
	}
	docker := need(t, "docker")
	ca := NewCA(t)
	py := NewPyPI(t, ca, "pypi.test")
	npm := NewNPM(t, ca, "npm.test")
	gp := NewGoProxy(t, ca, "goproxy.test")
	g := NewGit(t, ca, "git.test", "agent", "s3cret-pass")

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "consumer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteGoConsumer(filepath.Join(dir, "consumer")); err != nil {
		t.Fatal(err)
	}
	gitURL := strings.Replace(g.CloneURL(), "https://", "https://agent:s3cret-pass@", 1)
	script := `set -e
cp -r /t/consumer /tmp/consumer
python3 -m venv /tmp/venv
/tmp/venv/bin/pip install -q --no-cache-dir --disable-pip-version-check --cert /t/ca.pem --index-url ` + py.IndexURL() + ` sbxdemo
/tmp/venv/bin/python -c 'import sbxdemo; print(sbxdemo.greet("world"))'
mkdir /tmp/n && cd /tmp/n && echo '{}' > package.json
npm install -q --no-audit --no-fund --cafile /t/ca.pem --registry ` + npm.RegistryURL() + ` sbx-greet >/dev/null
node -e 'console.log(require("sbx-greet").greet("world"))'
cd /tmp/consumer
export ` + strings.Join(gp.Env(), " ") + ` SSL_CERT_FILE=/t/ca.pem GOFLAGS=-modcacherw GOMODCACHE=/tmp/gomod
go mod tidy && go run .
GIT_SSL_CAINFO=/t/ca.pem git clone -q ` + gitURL + ` /tmp/repo && cat /tmp/repo/README.md
`
	// A name of its own, so that a container left running when the
	// command's deadline kills the client is removed, and nothing else.
	name := fmt.Sprintf("egresstest-%d-%d", os.Getpid(), time.Now().UnixNano())
	env := append(hostEnv(t), "DOCKER_HOST="+os.Getenv("DOCKER_HOST"))
	t.Cleanup(func() { runErr("", env, docker, "rm", "-f", name) })
	args := []string{"run", "--rm", "--name", name, "--network", "host", "-e", "HOME=/tmp", "-v", dir + ":/t:ro"}
	for _, s := range []*Server{py.Server, npm.Server, gp.Server, g.Server} {
		args = append(args, "--add-host", s.Name()+":127.0.0.1")
	}
	args = append(args, image, "sh", "-c", script)
	out := run(t, "", env, docker, args...)
	want := Greeting + "\n" + Greeting + "\n" + Greeting + "\n" + GitSeedText
	if out != want {
		t.Errorf("the image's clients printed %q, want %q", out, want)
	}
}
