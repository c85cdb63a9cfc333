package gateway

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

func parseCfg(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestValidateNamesTheKey(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "x.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for _, tc := range []struct{ yaml, want string }{
		{"egress: {allow: ['exa mple.com']}", "egress.allow[0]:"},
		{"egress: {deny: ['10.0.0.0/33']}", "egress.deny[0]:"},
		{"egress: {hosts: {'pypi.test': 'not-an-ip'}}", "egress.hosts.pypi.test: \"not-an-ip\" is not an IP address"},
		{"egress: {hosts: {'*.test': '127.0.0.1'}}", "egress.hosts: \"*.test\" is not a host name"},
		{"egress: {ca_files: ['" + filepath.Join(dir, "missing.pem") + "']}", "egress.ca_files[0]:"},
		{"egress: {ca_files: ['" + notPEM + "']}", "holds no PEM certificate"},
		{"egress: {max_connections: -1}", "egress.max_connections:"},
		{"egress: {ca_dir: relative/dir}", "egress.ca_dir:"},
		{"secrets: [{name: GH, hosts: [a.test], value_env: X}]", "secrets[0].name:"},
		{"secrets: [{name: gh, value_env: X}]", "secrets[0].hosts: is empty"},
		{"secrets: [{name: gh, hosts: [a.test]}]", "give exactly one of value_file and value_env"},
		{"secrets: [{name: gh, hosts: [a.test], value_env: X, value_file: /y}]", "give exactly one of value_file and value_env"},
		{"secrets: [{name: gh, hosts: [10.0.0.0/8], value_env: X}]", "secrets[0].hosts[0]: \"10.0.0.0/8\" is an address range"},
		{"secrets: [{name: gh, hosts: [a.test], value_env: X, format: 'Bearer'}]", "secrets[0].format:"},
		{"secrets: [{name: gh, hosts: [a.test], value_env: X, basic_auth: {username: u}, format: '{}'}]", "a basic_auth secret has no format"},
		{"secrets: [{name: gh, hosts: [a.test], value_env: X}, {name: gh, hosts: [b.test], value_env: Y}]", "secrets[1].name: secret \"gh\" is listed twice"},
		{"tenants: [{name: a, token_sha256: '" + strings.Repeat("a", 64) + "', egress: {allow: ['bad rule!']}}]", "tenants[0].egress.allow[0]:"},
		{"tenants: [{name: a, token_sha256: '" + strings.Repeat("a", 64) + "'}]\nsecrets: [{name: gh, hosts: [a.test], value_env: X}]", "secrets: with tenants configured"},
	} {
		err := Validate(parseCfg(t, tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.yaml, err, tc.want)
		}
	}
	if err := Validate(parseCfg(t, "egress: {allow: ['*', '10.1.0.0/16'], hosts: {pypi.test: [127.0.0.1, '::1']}}\nsecrets: [{name: gh, hosts: ['*.github.com'], basic_auth: {username: x}, value_env: GH}]")); err != nil {
		t.Fatalf("a good section: %v", err)
	}
	if _, err := config.Parse([]byte("default_network: proxi")); err == nil || !strings.Contains(err.Error(), "default_network:") {
		t.Errorf("a bad default_network: %v", err)
	}
}

func newGateway(t *testing.T, yaml string) *Gateway {
	t.Helper()
	g, err := New(parseCfg(t, yaml), Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func proxyInfo(t *testing.T, tenant, id string, e *sandbox.EgressSpec) sandbox.Info {
	t.Helper()
	return sandbox.Info{ID: id, Tenant: tenant, Conversation: "c-" + id,
		Labels: sandbox.NetworkLabels(sandbox.Spec{Network: sandbox.NetworkProxy, Egress: e})}
}

// The levels: deployment, tenant, sandbox; a sandbox narrows, never widens;
// with nothing named by the operator nothing is allowed.
func TestLayersNarrowNeverWiden(t *testing.T) {
	hash := strings.Repeat("b", 64)
	g := newGateway(t, `
egress: {allow: ['*.example.com', 'pypi.org'], deny: ['evil.example.com']}
tenants:
  - {name: acme, token_sha256: '`+strings.Repeat("a", 64)+`', egress: {allow: ['api.example.com', 'pypi.org']}}
  - {name: open, token_sha256: '`+hash+`'}
`)
	ctx := context.Background()
	cases := []struct {
		tenant string
		spec   *sandbox.EgressSpec
		host   string
		ok     bool
	}{
		{"acme", nil, "api.example.com", true},
		{"acme", nil, "pypi.org", true},
		{"acme", nil, "www.example.com", false}, // the tenant narrowed the deployment
		{"acme", &sandbox.EgressSpec{Allow: []string{"pypi.org"}}, "api.example.com", false},
		{"acme", &sandbox.EgressSpec{Allow: []string{"www.example.com"}}, "www.example.com", false}, // cannot widen
		{"open", nil, "www.example.com", true},
		{"open", nil, "evil.example.com", false},
		{"open", nil, "github.com", false},
	}
	for i, c := range cases {
		info := proxyInfo(t, c.tenant, "sb"+string(rune('a'+i)), c.spec)
		b := g.boxFor(info)
		if got := b.gate.Policy().Host(c.host, 443).Allowed; got != c.ok {
			t.Errorf("tenant %s, sandbox %+v, %s: allowed %v, want %v", c.tenant, c.spec, c.host, got, c.ok)
		}
	}
	st, err := g.Network(ctx, proxyInfo(t, "acme", "sbe", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.NotEffective, []string{"www.example.com"}) {
		t.Errorf("not effective: %v, want the rule the tenant refuses", st.NotEffective)
	}

	bare := newGateway(t, "")
	b := bare.boxFor(proxyInfo(t, AdminTenant, "x", nil))
	if v := b.gate.Policy().Host("pypi.org", 443); v.Allowed {
		t.Errorf("with nothing named anywhere pypi.org is allowed: %+v", v)
	}
	b = bare.boxFor(proxyInfo(t, AdminTenant, "y", &sandbox.EgressSpec{Allow: []string{"pypi.org"}}))
	if b.gate.Policy().Host("pypi.org", 443).Allowed {
		t.Error("a sandbox's own allow list opened pypi.org where the operator named nothing")
	}
	// The tenant's list is enough for the operator to have named it.
	hash = strings.Repeat("d", 64)
	byTenant := newGateway(t, "tenants: [{name: t1, token_sha256: '"+hash+"', egress: {allow: [pypi.org]}}]")
	if !byTenant.boxFor(proxyInfo(t, "t1", "z", nil)).gate.Policy().Host("pypi.org", 443).Allowed {
		t.Error("a tenant's allow list does not apply when the deployment names nothing")
	}
	st, err = bare.Network(ctx, proxyInfo(t, AdminTenant, "y", &sandbox.EgressSpec{Allow: []string{"pypi.org"}}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.NotEffective, []string{"pypi.org"}) || len(st.Allowed) != 0 {
		t.Errorf("with nothing named outside the sandbox: not effective %v, allowed %v; want its own pypi.org not effective and nothing allowed", st.NotEffective, st.Allowed)
	}
}

func TestPrepare(t *testing.T) {
	g := newGateway(t, `
default_network: proxy
tenants:
  - {name: acme, token_sha256: '`+strings.Repeat("a", 64)+`', secrets: [{name: gh, hosts: [api.github.com], value_env: GH}]}
  - {name: plain, token_sha256: '`+strings.Repeat("c", 64)+`', default_network: none}
`)
	spec := sandbox.Spec{}
	if err := g.Prepare("acme", &spec); err != nil || spec.Network != "proxy" || spec.Egress == nil || !spec.Egress.Open {
		t.Fatalf("the default network: %+v %v", spec, err)
	}
	spec = sandbox.Spec{}
	if err := g.Prepare("plain", &spec); err != nil || spec.Network != "none" || spec.Egress != nil {
		t.Fatalf("a tenant's own default: %+v %v", spec, err)
	}
	for _, tc := range []struct {
		tenant string
		spec   sandbox.Spec
		want   string
	}{
		{"acme", sandbox.Spec{Network: "proxy", Egress: &sandbox.EgressSpec{Secrets: []string{"npm"}}}, `secret "npm" is not one of tenant acme's secrets (it has gh)`},
		{"plain", sandbox.Spec{Network: "proxy", Egress: &sandbox.EgressSpec{Secrets: []string{"gh"}}}, `(it has none)`},
		{"acme", sandbox.Spec{Network: "proxy", Egress: &sandbox.EgressSpec{Allow: []string{"a b"}}}, "egress.allow[0]:"},
		{"acme", sandbox.Spec{Network: "bridge", Egress: &sandbox.EgressSpec{Allow: []string{"a.test"}}}, `apply only to network "proxy"`},
	} {
		s := tc.spec
		err := g.Prepare(tc.tenant, &s)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// A change made through the API is kept: a restarted gateway applies it.
func TestPolicyChangeIsKept(t *testing.T) {
	dir := t.TempDir()
	cfg := parseCfg(t, "egress: {allow: ['*']}")
	g, err := New(cfg, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	info := proxyInfo(t, AdminTenant, "keep", nil)
	ctx := context.Background()
	if _, err := g.SetNetwork(ctx, info, Policy{Allow: []string{"pypi.org"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.SetNetwork(ctx, info, Policy{Allow: []string{"bad rule"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a bad rule: %v", err)
	}
	none := info
	none.Labels = sandbox.NetworkLabels(sandbox.Spec{})
	if _, err := g.SetNetwork(ctx, none, Policy{Allow: []string{"a.test"}}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("a change to a network-none sandbox: %v", err)
	}
	g.Close()

	g2, err := New(cfg, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	st, err := g2.Network(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Allow, []string{"pypi.org"}) || !slices.Equal(st.Allowed, []string{"pypi.org"}) {
		t.Fatalf("after a restart: %+v", st)
	}
	if string(g2.CertPEM()) != string(g.CertPEM()) {
		t.Fatal("the CA changed across a restart; sandboxes trusting the old one would fail")
	}
}

// The README's example config passes the egress checks too.
func TestREADMEExampleValidates(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## Configuration")
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("the README's Configuration section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	block = strings.ReplaceAll(block, "<hex sha-256 of the token>", strings.Repeat("ab", 32))
	cfg := parseCfg(t, block)
	if err := Validate(cfg); err != nil {
		t.Fatalf("the README's example fails the egress checks: %v", err)
	}
	if len(cfg.Tenants) != 1 || cfg.Tenants[0].Egress == nil || len(cfg.Tenants[0].Secrets) != 1 || len(cfg.Egress.Allow) == 0 {
		t.Fatalf("the example lost its egress keys: %+v", cfg.Tenants)
	}
}

// Where the backend can label a sandbox after creation, a change is kept
// on the sandbox: another replica, with a data dir of its own, applies it.
func TestPolicyChangeFollowsTheSandbox(t *testing.T) {
	cfg := parseCfg(t, "egress: {allow: ['*']}")
	info := proxyInfo(t, AdminTenant, "moved", nil)
	var labelled map[string]string
	annotate := func(ctx context.Context, i sandbox.Info, key, value string) error {
		if i.ID != info.ID {
			t.Errorf("annotated %s, want %s", i.ID, info.ID)
		}
		labelled = map[string]string{key: value}
		return nil
	}
	dirA := t.TempDir()
	a, err := New(cfg, Options{DataDir: dirA, Annotate: annotate})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.SetNetwork(context.Background(), info, Policy{Allow: []string{"pypi.org"}}); err != nil {
		t.Fatal(err)
	}
	if labelled[sandbox.LabelEgressChange] == "" {
		t.Fatalf("the change was not kept on the sandbox: %v", labelled)
	}
	if entries, _ := os.ReadDir(filepath.Join(dirA, "egress", "policies")); len(entries) != 0 {
		t.Fatal("the change went to a file as well")
	}

	// The replica that takes the conversation over sees the sandbox's
	// labels, not the first replica's data dir.
	moved := info
	moved.Labels = map[string]string{}
	for k, v := range info.Labels {
		moved.Labels[k] = v
	}
	for k, v := range labelled {
		moved.Labels[k] = v
	}
	b, err := New(cfg, Options{DataDir: t.TempDir(), Annotate: annotate})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := b.Network(context.Background(), moved)
	if err != nil || !slices.Equal(st.Allow, []string{"pypi.org"}) {
		t.Fatalf("on the other replica: %+v %v", st, err)
	}

	// A backend that cannot label (Docker) keeps it in the data dir.
	dir := t.TempDir()
	c, err := New(cfg, Options{DataDir: dir, Annotate: func(context.Context, sandbox.Info, string, string) error { return sandbox.ErrNoAnnotations }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SetNetwork(context.Background(), info, Policy{Allow: []string{"npm.test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "egress", "policies", info.ID+".json")); err != nil {
		t.Fatalf("without labels the change is not in the data dir: %v", err)
	}
}

// Replicas given one ca_dir present one CA, whichever serves a sandbox.
func TestSharedCADir(t *testing.T) {
	shared := t.TempDir()
	cfg := parseCfg(t, "egress: {allow: ['*'], ca_dir: '"+shared+"'}")
	a, err := New(cfg, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(cfg, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if string(a.CertPEM()) != string(b.CertPEM()) {
		t.Fatal("two replicas with one ca_dir present different CAs")
	}
	if _, err := os.Stat(filepath.Join(shared, "ca.key")); err != nil {
		t.Fatalf("the CA is not in ca_dir: %v", err)
	}
}
