package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
const hashB = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"

func TestParseFull(t *testing.T) {
	c, err := Parse([]byte(`
tenants:
  - {name: acme, token_sha256: ` + hashA + `}
  - name: beta
    token_sha256: ` + strings.ToUpper(hashB) + `
allowed_host_paths: [/srv/checkouts]
default_image: my-image:1
idle_ttl: 30m
run_ttl: 2h
max_runs_per_tenant: 7
workers:
  fast: {command: [fast-agent, --quick]}
  good: {command: [good-agent]}
docker:
  agent_binary: /opt/sandbox-agent
  extra_caps: [CAP_SYS_PTRACE]
limits:
  max_body_bytes: 2048
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tenants) != 2 || c.Tenants[0].Name != "acme" || c.Tenants[1].TokenSHA256 != strings.ToUpper(hashB) {
		t.Errorf("tenants = %+v", c.Tenants)
	}
	if c.DefaultImage != "my-image:1" || c.IdleTTL.D() != 30*time.Minute || c.RunTTL.D() != 2*time.Hour {
		t.Errorf("image/ttl = %q %v %v", c.DefaultImage, c.IdleTTL.D(), c.RunTTL.D())
	}
	if c.MaxRunsPerTenant != 7 || c.Limits.MaxBodyBytes != 2048 || c.Limits.MaxToolBodyBytes != DefaultMaxToolBodyBytes {
		t.Errorf("limits = %d %+v", c.MaxRunsPerTenant, c.Limits)
	}
	if c.Workers.Fast == nil || strings.Join(c.Workers.Fast.Command, " ") != "fast-agent --quick" || !c.WorkersConfigured() {
		t.Errorf("workers = %+v", c.Workers)
	}
	if c.Docker.AgentBinary != "/opt/sandbox-agent" || len(c.Docker.ExtraCaps) != 1 {
		t.Errorf("docker = %+v", c.Docker)
	}
}

func TestDefaults(t *testing.T) {
	for name, c := range map[string]*Config{"Default": Default(), "empty file": mustParse(t, "")} {
		if c.DefaultImage != "sandboxd-sandbox:latest" || c.IdleTTL != 0 || c.RunTTL.D() != DefaultRunTTL ||
			c.MaxRunsPerTenant != DefaultMaxRunsPerTenant || c.Limits.MaxBodyBytes != 1<<20 || c.Limits.MaxToolBodyBytes != 16<<20 {
			t.Errorf("%s: %+v", name, c)
		}
		if c.WorkersConfigured() || c.Path != "" {
			t.Errorf("%s: workers or path set: %+v", name, c)
		}
	}
}

func mustParse(t *testing.T, s string) *Config {
	t.Helper()
	c, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"typo at top level", "default_imag: x\n", []string{"line 1", `unknown key "default_imag"`}},
		{"typo nested", "docker:\n  agent_bin: /x\n", []string{"line 2", `unknown key "agent_bin"`}},
		{"typo in tenant", "tenants:\n  - name: a\n    token: x\n", []string{"line 3", `"token"`}},
		{"typo in worker tier", "workers:\n  quick: {command: [x]}\n", []string{"line 2", `"quick"`}},
		{"wrong type", "max_runs_per_tenant: many\n", []string{"line 1", `"many"`, "whole number"}},
		{"list expected", "allowed_host_paths: /srv\n", []string{"line 1", "a list"}},
		{"bad duration", "idle_ttl: 5 minutes\n", []string{"line 1", `"5 minutes"`, "unit"}},
		{"bare number duration", "run_ttl: 300\n", []string{`"300"`, "unit"}},
		{"syntax", "tenants: [\n", []string{"not valid YAML"}},
		{"two documents", "default_image: a\n---\ndefault_image: b\n", []string{"more than one YAML document"}},
		{"bad tenant name", "tenants: [{name: 'Acme Corp', token_sha256: " + hashA + "}]\n", []string{`"Acme Corp"`, "lower-case"}},
		{"short hash", "tenants: [{name: acme, token_sha256: abc}]\n", []string{"64 hex digits"}},
		{"duplicate tenant", "tenants: [{name: a, token_sha256: " + hashA + "}, {name: a, token_sha256: " + hashB + "}]\n", []string{"listed twice"}},
		{"shared hash", "tenants: [{name: a, token_sha256: " + hashA + "}, {name: b, token_sha256: " + hashA + "}]\n", []string{"same as tenant \"a\""}},
		{"relative host path", "allowed_host_paths: [srv]\n", []string{"not an absolute path"}},
		{"unclean host path", "allowed_host_paths: [/srv/../etc/]\n", []string{"clean form", `"/etc"`}},
		{"root host path", "allowed_host_paths: [/]\n", []string{"every host directory"}},
		{"negative idle ttl", "idle_ttl: -5m\n", []string{"idle_ttl: is negative"}},
		{"empty worker command", "workers: {fast: {command: []}}\n", []string{"workers.fast.command: is empty"}},
		{"bad cap", "docker: {extra_caps: [ptrace]}\n", []string{`"ptrace"`, "capability"}},
		{"relative agent", "docker: {agent_binary: bin/agent}\n", []string{"not an absolute path"}},
		{"negative limit", "limits: {max_body_bytes: -1}\n", []string{"positive"}},
		{"bad deployment", "deployment: Prod_EU\n", []string{`"Prod_EU"`, "lower-case"}},
		{"long deployment", "deployment: " + strings.Repeat("a", 41) + "\n", []string{"1 to 40"}},
		{"deployment ends in dash", "deployment: prod-\n", []string{`"prod-"`}},
		{"adopt not a bool", "adopt_unlabelled_sandboxes: sometimes\n", []string{"line 1", "true or false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sandboxd.yaml")
	if err := os.WriteFile(p, []byte("allowed_host_paths: [/srv]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p || len(c.AllowedHostPaths) != 1 {
		t.Errorf("Load = %+v", c)
	}
	c, err = Load("")
	if err != nil || c.Path != "" {
		t.Errorf("Load(\"\") = %+v, %v", c, err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file error = %v", err)
	}
	if err := os.WriteFile(p, []byte("bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("typo error = %v", err)
	}
}

func TestDeployment(t *testing.T) {
	c, err := Parse([]byte("deployment: prod-eu\nadopt_unlabelled_sandboxes: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Deployment != "prod-eu" || !c.AdoptUnlabelledSandboxes {
		t.Fatalf("deployment = %q, adopt = %v", c.Deployment, c.AdoptUnlabelledSandboxes)
	}
	for _, ok := range []string{"a", "0", "dir-0123456789ab", strings.Repeat("a", 40)} {
		if _, err := Parse([]byte("deployment: \"" + ok + "\"\n")); err != nil {
			t.Errorf("deployment %q: %v", ok, err)
		}
	}
	if d := Default(); d.Deployment != "" || d.AdoptUnlabelledSandboxes {
		t.Errorf("the default config names deployment %q (adopt %v); want none, so the data dir names it", d.Deployment, d.AdoptUnlabelledSandboxes)
	}
}
