package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/internal/egresstest"
)

// egressWorld is the machine's local servers a proxy sandbox reaches, and
// the daemon that lets it.
type egressWorld struct {
	ca     *egresstest.CA
	pypi   *egresstest.PyPI
	npm    *egresstest.NPM
	git    *egresstest.Git
	goprox *egresstest.GoProxy
	blob   *egresstest.Blob
	other  *egresstest.Blob // a server the policy never allows
	secret string           // the Git password, known only to sandboxd
	d      *daemon
}

func newEgressWorld(t *testing.T) *egressWorld {
	t.Helper()
	w := &egressWorld{ca: egresstest.NewCA(t)}
	w.secret = "sbx-secret-" + randomHex(t, 16)
	w.pypi = egresstest.NewPyPI(t, w.ca, "pypi.test")
	w.npm = egresstest.NewNPM(t, w.ca, "npm.test")
	w.git = egresstest.NewGit(t, w.ca, "git.test", "agent", w.secret)
	w.goprox = egresstest.NewGoProxy(t, w.ca, "goproxy.test")
	w.blob = egresstest.NewBlob(t, w.ca, "blob.test")
	w.other = egresstest.NewBlob(t, w.ca, "other.test")

	dir := t.TempDir()
	secretFile := filepath.Join(dir, "git-password")
	if err := os.WriteFile(secretFile, []byte(w.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{}
	for _, s := range []*egresstest.Server{w.pypi.Server, w.npm.Server, w.git.Server, w.goprox.Server, w.blob.Server, w.other.Server} {
		hosts[s.Name()] = "127.0.0.1"
	}
	cfg := map[string]any{
		"egress": map[string]any{
			// Every name here is the operator's override, so its loopback
			// address is trusted; "localhost" goes through the resolver,
			// whose loopback answer is refused.
			"allow":    []string{"pypi.test", "npm.test", "git.test", "goproxy.test", "blob.test", "localhost"},
			"hosts":    hosts,
			"ca_files": []string{w.ca.PEMFile()},
		},
		"secrets": []map[string]any{{
			"name": "git", "hosts": []string{"git.test"}, "basic_auth": map[string]string{"username": w.git.User()}, "value_file": secretFile,
		}},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "sandboxd.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	w.d = startDaemon(t, "docker", filepath.Join(dir, "data"), "--config", path)
	return w
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// shellOut runs a command in the run's sandbox and returns its exit status
// and the tool's whole answer.
func shellOut(t *testing.T, d *daemon, run, command string, timeout int) (int, string) {
	t.Helper()
	res, err := d.Client.CallTool(ctx(t), run, "shell", mustJSON(t, map[string]any{"command": command, "timeout_s": timeout}))
	if err != nil {
		t.Fatalf("shell %q: %v", command, err)
	}
	text := res.Text()
	m := regexp.MustCompile(`exit status (\d+)`).FindStringSubmatch(text)
	if m == nil {
		return -1, text
	}
	code, _ := strconv.Atoi(m[1])
	return code, text
}

// TestEgressProxy is network mode "proxy" end to end, in a Docker sandbox
// with no network: the package managers and git fetch through sandboxd
// from servers on this machine, a secret is added that never enters the
// sandbox, and everything else is refused with a sentence and recorded.
func TestEgressProxy(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	w := newEgressWorld(t)
	d := w.d
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{
		Conversation: "egress", Image: dockerImage(), Network: "proxy", Secrets: []string{"git"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Network != "proxy" {
		t.Fatalf("the sandbox's network is %q, want proxy", sb.Network)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "egress"})
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string // every answer, searched for the secret at the end
	sh := func(cmd string) (int, string) {
		code, out := shellOut(t, d, run.ID, cmd, 240)
		outputs = append(outputs, out)
		return code, out
	}

	// The programs check the tunnelled servers' certificates themselves:
	// the test's CA joins the bundle the sandbox trusts (what a user does
	// for a private registry).
	mustCall(t, d, run.ID, "write", map[string]any{"path": ".sbx/test-ca.pem", "content": string(w.ca.PEM())})
	if code, out := sh(`cat .sbx/test-ca.pem >> "$SSL_CERT_FILE" && cat .sbx/test-ca.pem >> /etc/ssl/certs/ca-certificates.crt && env | grep -c '^HTTPS_PROXY=http://127.0.0.1:'`); code != 0 {
		t.Fatalf("the sandbox has no proxy variables: %s", out)
	}

	t.Run("curl", func(t *testing.T) {
		code, out := sh("curl -sS --fail " + w.blob.URL() + "/hello")
		if code != 0 || !strings.Contains(out, "hello") {
			t.Fatalf("curl of an allowed host: %s", out)
		}
	})

	t.Run("E2B network rules add headers on the way out", func(t *testing.T) {
		e2bEgressRules(t, w)
	})

	t.Run("pip", func(t *testing.T) {
		code, out := sh("pip install --user --break-system-packages --no-cache-dir --index-url " + w.pypi.IndexURL() + " sbxdemo && " +
			`python3 -c 'import sbxdemo; print(sbxdemo.greet("world"))'`)
		if code != 0 || !strings.Contains(out, egresstest.Greeting) {
			t.Fatalf("pip install through the proxy: %s", out)
		}
		// pyright resolves the installed package: no import error.
		mustCall(t, d, run.ID, "write", map[string]any{"path": "py/pyproject.toml", "content": "[project]\nname = \"use\"\nversion = \"0.1\"\n"})
		mustCall(t, d, run.ID, "write", map[string]any{"path": "py/use.py", "content": "import sbxdemo\n\nprint(sbxdemo.greet(\"world\"))\n"})
		diag := mustCall(t, d, run.ID, "lsp", map[string]any{"action": "diagnostics", "file": "py/use.py"})
		if !strings.Contains(diag, "no problems") {
			t.Fatalf("pyright does not resolve the installed package: %s", diag)
		}
	})

	t.Run("npm", func(t *testing.T) {
		code, out := sh("mkdir -p /tmp/npmproj && cd /tmp/npmproj && npm install --no-audit --no-fund --registry " + w.npm.RegistryURL() + " sbx-greet && " +
			`node -e 'console.log(require("sbx-greet").greet("world"))'`)
		if code != 0 || !strings.Contains(out, egresstest.Greeting) {
			t.Fatalf("npm install through the proxy: %s", out)
		}
	})

	t.Run("go module", func(t *testing.T) {
		files := egresstest.GoConsumerFiles()
		for name, content := range files {
			mustCall(t, d, run.ID, "write", map[string]any{"path": "gomod/" + name, "content": content})
		}
		env := strings.Join(w.goprox.Env(), " ")
		code, out := sh("cd gomod && env " + env + " go mod tidy && env " + env + " go build -o /tmp/greet . && /tmp/greet")
		if code != 0 || !strings.Contains(out, egresstest.Greeting) {
			t.Fatalf("go mod tidy and build through the proxy: %s", out)
		}
		diag := mustCall(t, d, run.ID, "lsp", map[string]any{"action": "diagnostics", "file": "gomod/main.go"})
		if !strings.Contains(diag, "no problems") {
			t.Fatalf("gopls still reports problems once the dependencies were fetched: %s", diag)
		}
	})

	t.Run("git with a secret", func(t *testing.T) {
		code, out := sh("cd /tmp && rm -rf clone && git clone " + w.git.CloneURL() + " clone && cd clone && " +
			"git -c user.name=a -c user.email=a@b commit -q --allow-empty -m pushed-through-sandboxd && git push -q origin HEAD:main && git log --oneline -1")
		if code != 0 || !strings.Contains(out, "pushed-through-sandboxd") {
			t.Fatalf("git clone and push with no credential in the sandbox: %s", out)
		}
		refs, err := w.git.Refs()
		if err != nil {
			t.Fatal(err)
		}
		if refs["refs/heads/main"] == w.git.SeedCommit() {
			t.Fatal("the push did not land on the server")
		}
		want := w.git.BasicAuth()
		got := false
		for _, a := range w.git.Authorizations() {
			got = got || a == want
		}
		if !got {
			t.Fatalf("the server never received the secret: %v", w.git.Authorizations())
		}
	})

	// Each refusal reaches the program with the sentence, where it shows.
	// Plain-HTTP refusals show the sentence as the response body; a
	// program that ignores NO_PROXY (curl --noproxy '') sends even the
	// sandbox's loopback names to the proxy, which refuses them.
	plain := func(u string) string { return strings.Replace(u, "https:", "http:", 1) }
	blobPort := strconv.Itoa(w.blob.Port())
	refusals := []struct {
		name, cmd, want string
		exit0           bool // the program ends well though nothing got out
	}{
		{"unlisted host", "curl -sS --fail-with-body " + plain(w.other.URL()) + "/hello", "sandboxd: egress to other.test:" + strconv.Itoa(w.other.Port()) + " is not allowed for this sandbox; allowed: pypi.test", false},
		{"unlisted host over CONNECT", "curl -sS -v " + w.other.URL() + "/hello", "403", false},
		{"pip from an unlisted host", "pip download --no-cache-dir --no-deps -d /tmp/x --index-url " + strings.Replace(w.pypi.IndexURL(), "pypi.test", "other.test", 1) + " sbxdemo", "Tunnel connection failed: 403 sandboxd: egress to other.test:", false},
		{"IP literal", "curl -sS --fail-with-body --noproxy '' http://192.0.2.7:" + blobPort + "/hello", "sandboxd: egress to 192.0.2.7:" + blobPort + " is not allowed", false},
		{"loopback literal", "curl -sS --fail-with-body --noproxy '' http://127.0.0.1:" + blobPort + "/hello", "is not allowed", false},
		{"a name resolving to loopback", "curl -sS --fail-with-body --noproxy '' http://localhost:" + blobPort + "/hello", "loopback", false},
		{"Host header not the URL's", "curl -sS --fail-with-body -H 'Host: other.test' " + plain(w.blob.URL()) + "/hello", "Host header", false},
		{"another server name in the ClientHello", `python3 - <<'EOF'
import os, socket, ssl, urllib.parse
p = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
s = socket.create_connection((p.hostname, p.port), 10)
s.sendall(b"CONNECT ` + w.blob.HostPort() + ` HTTP/1.1\r\nHost: ` + w.blob.HostPort() + `\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
try:
    ctx.wrap_socket(s, server_hostname="other.test").do_handshake()
    print("HANDSHAKE-OK")
except Exception as e:
    print("refused:", e)
EOF`, "refused:", true},
		{"no proxy variables", "env -u HTTPS_PROXY -u https_proxy -u ALL_PROXY -u all_proxy -u HTTP_PROXY -u http_proxy curl -sS --max-time 10 " + w.blob.URL() + "/hello", "resolve", false},
		{"raw TCP to an address", `python3 -c 'import socket; socket.create_connection(("1.1.1.1", 443), 5)'`, "unreachable", false},
		{"DNS", "getent hosts pypi.org || echo no-answer", "no-answer", true},
		{"UDP", `python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("1.1.1.1", 53))'`, "unreachable", false},
	}
	for _, r := range refusals {
		t.Run("refused/"+r.name, func(t *testing.T) {
			code, out := sh(r.cmd)
			if strings.Contains(out, "HANDSHAKE-OK") || !strings.Contains(out, r.want) || (code == 0) != r.exit0 {
				t.Fatalf("%s: exit %d, want %q in:\n%s", r.name, code, r.want, out)
			}
		})
	}

	t.Run("recorded", func(t *testing.T) {
		recs, err := d.Client.Egress(ctx(t), sb.ID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		seen := func(host, decision string, check func(gateway.Record) bool) bool {
			for _, r := range recs {
				if r.Host == host && r.Decision == decision && (check == nil || check(r)) {
					return true
				}
			}
			return false
		}
		for _, c := range []struct {
			host, decision string
			check          func(gateway.Record) bool
		}{
			{"pypi.test", "allow", func(r gateway.Record) bool { return r.BytesDown > 0 && r.Addr != "" }},
			{"git.test", "allow", func(r gateway.Record) bool { return len(r.Secrets) == 1 && r.Secrets[0] == "git" }},
			{"other.test", "deny", func(r gateway.Record) bool { return r.Reason != "" }},
			{"192.0.2.7", "deny", nil},
			{"127.0.0.1", "deny", nil},
			{"localhost", "deny", func(r gateway.Record) bool { return strings.Contains(r.Reason, "loopback") }},
			{"blob.test", "deny", nil}, // the SNI and Host mismatches
		} {
			if !seen(c.host, c.decision, c.check) {
				t.Errorf("no %s decision for %s among %d records", c.decision, c.host, len(recs))
			}
		}
		for _, r := range recs {
			if r.Sandbox != sb.ID || r.Conversation != "egress" || r.Tenant == "" {
				t.Fatalf("a record without its sandbox, conversation or tenant: %+v", r)
			}
		}
		// Each decision is an event record of the audit too: the same
		// count of each, naming the sandbox and the target.
		waitFor(t, 30*time.Second, "the egress decisions in the audit record", func() error {
			events := map[string]int{}
			for _, r := range auditRecordsAt(t, d.URL, d.Token, "sandbox="+sb.ID) {
				if r.Kind == audit.KindEvent && strings.HasPrefix(r.Action, "egress.") {
					events[r.Action]++
					if r.Action == "egress.denied" && (r.Outcome != "denied" || r.Detail == "") {
						return fmt.Errorf("a denied egress record %+v lacks its outcome or detail", r)
					}
				}
			}
			var allowed, denied int
			for _, r := range recs {
				if r.Decision == "allow" {
					allowed++
				} else {
					denied++
				}
			}
			if events["egress.allowed"] < allowed || events["egress.denied"] < denied {
				return fmt.Errorf("audit has %v, the egress listing %d allowed and %d denied", events, allowed, denied)
			}
			return nil
		})
		for _, s := range []string{`sandboxd_egress_connections_total{decision="allow"}`, `sandboxd_egress_connections_total{decision="deny"}`, `sandboxd_egress_bytes_total{direction="down"}`} {
			if v := metricValue(t, d, s); v <= 0 {
				t.Errorf("%s = %v, want > 0", s, v)
			}
		}
	})

	t.Run("live policy change", func(t *testing.T) {
		// A slow download of blob.test runs while the sandbox's policy
		// drops the host: it is cut, and the next connection is refused.
		type result struct {
			code int
			out  string
			took time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			code, out := shellOut(t, d, run.ID, "curl -sS -o /dev/null "+w.blob.URL()+"/bytes/4000000?rate=100000; echo curl-exit=$?", 120)
			done <- result{code, out, time.Since(start)}
		}()
		waitFor(t, 30*time.Second, "the download under way", func() error {
			st, err := d.Client.Network(ctx(t), sb.ID)
			if err != nil {
				return err
			}
			if st.OpenConnections == 0 {
				return fmt.Errorf("no connection open yet")
			}
			return nil
		})
		changed := time.Now()
		st, err := d.Client.SetNetwork(ctx(t), sb.ID, gateway.Policy{Allow: []string{"pypi.test", "npm.test", "git.test", "goproxy.test"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range st.Allowed {
			if a == "blob.test" {
				t.Fatalf("blob.test is still allowed after the change: %v", st.Allowed)
			}
		}
		select {
		case r := <-done:
			if strings.Contains(r.out, "curl-exit=0") || time.Since(changed) > 10*time.Second {
				t.Fatalf("the open download was not cut (after %s): %s", time.Since(changed), r.out)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the open download was not cut within 30 s of the change")
		}
		code, out := sh("curl -sS --fail-with-body " + plain(w.blob.URL()) + "/hello")
		if code == 0 || !strings.Contains(out, "is not allowed for this sandbox") {
			t.Fatalf("a new connection after the change: %s", out)
		}
		got, err := d.Client.Network(ctx(t), sb.ID)
		if err != nil || strings.Join(got.Allow, ",") != "pypi.test,npm.test,git.test,goproxy.test" {
			t.Fatalf("GET network after the change: %+v %v", got, err)
		}
	})

	t.Run("after a restart, with no tool call", func(t *testing.T) {
		// A program started outside any tool call (docker exec here; a
		// long-lived process in general) gets out once sandboxd is back,
		// before anyone calls a tool: the pipe is kept open.
		st, err := d.Client.Network(ctx(t), sb.ID)
		if err != nil || st.Proxy == "" {
			t.Fatalf("the proxy's address before the restart: %+v %v", st, err)
		}
		d.restart()
		if _, err := d.Client.SetNetwork(ctx(t), sb.ID, gateway.Policy{Allow: []string{"blob.test"}}); err != nil {
			t.Fatal(err)
		}
		var out []byte
		waitFor(t, 30*time.Second, "a connection through the proxy after the restart", func() error {
			c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err = exec.CommandContext(c, "docker", "exec", "-e", "HTTPS_PROXY="+st.Proxy, "sandboxd-"+sb.ID,
				"curl", "-sS", "--fail", "--cacert", "/workspace/.sbx/test-ca.pem", w.blob.URL()+"/hello").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
		if !strings.Contains(string(out), "hello") {
			t.Fatalf("after the restart: %s", out)
		}
	})

	t.Run("the secret leaves no trace", func(t *testing.T) {
		// The value is put together inside the search, from two halves, so
		// that no command line, environment or file of the search holds it.
		half := len(w.secret) / 2
		script := `import os, sys
v = (sys.argv[1] + sys.argv[2]).encode()
hits = []
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for f in files:
        p = os.path.join(root, f)
        try:
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as fh:
                prev = b""
                while True:
                    b = fh.read(1 << 20)
                    if not b:
                        break
                    if v in prev + b:
                        hits.append(p)
                        break
                    prev = b[-len(v):]
        except OSError:
            pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for what in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, what), "rb") as fh:
                    if v in fh.read():
                        hits.append("/proc/%s/%s" % (pid, what))
            except OSError:
                pass
print("HITS:", hits)
`
		mustCall(t, d, run.ID, "write", map[string]any{"path": ".sbx/search.py", "content": script})
		// The search finds what is there: a decoy in a file deep in the
		// image's tree is found.
		decoy := "sbx-decoy-" + randomHex(t, 16)
		if code, out := sh("mkdir -p /usr/share/doc/zz-decoy && printf '%s%s' '" + decoy[:10] + "' '" + decoy[10:] + "' > /usr/share/doc/zz-decoy/f"); code != 0 {
			t.Fatal(out)
		}
		if _, out := sh("python3 .sbx/search.py '" + decoy[:10] + "' '" + decoy[10:] + "'"); !strings.Contains(out, "/usr/share/doc/zz-decoy/f") {
			t.Fatalf("the search does not find a decoy: %s", out)
		}
		_, out := sh("python3 .sbx/search.py '" + w.secret[:half] + "' '" + w.secret[half:] + "'")
		if !strings.Contains(out, "HITS: []") {
			t.Fatalf("the secret is in the sandbox: %s", out)
		}
		for _, o := range outputs {
			if strings.Contains(o, w.secret) {
				t.Fatalf("an answer of the agent holds the secret: %s", o)
			}
		}
	})
}
