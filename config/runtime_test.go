package config

import (
	"slices"
	"strings"
	"testing"
)

func TestRuntimeKeys(t *testing.T) {
	c, err := Parse([]byte("runtime: gvisor\ntenants:\n  - {name: a, token_sha256: " + strings.Repeat("a", 64) + ", runtime: runc, runtimes: [runc], read_only_root: true}\n  - {name: b, token_sha256: " + strings.Repeat("b", 64) + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RuntimeFor("a"); got != "runc" {
		t.Errorf("tenant a's runtime is %q, want its own runc", got)
	}
	if got := c.RuntimeFor("b"); got != "gvisor" {
		t.Errorf("tenant b's runtime is %q, want the deployment's gvisor", got)
	}
	if got := c.RuntimesFor("a"); !slices.Equal(got, []string{"runc"}) {
		t.Errorf("tenant a may use %v, want [runc]", got)
	}
	if got := c.RuntimesFor("b"); got != nil {
		t.Errorf("tenant b may use %v, want nil (all the deployment serves)", got)
	}
	if !c.ReadOnlyRootFor("a") || c.ReadOnlyRootFor("b") {
		t.Errorf("read_only_root: a %v b %v, want true false", c.ReadOnlyRootFor("a"), c.ReadOnlyRootFor("b"))
	}
	if got := Default().RuntimeFor("x"); got != "runc" {
		t.Errorf("default runtime %q, want runc", got)
	}
}

func TestRuntimeKeysRefused(t *testing.T) {
	tok := strings.Repeat("a", 64)
	for in, want := range map[string]string{
		"runtime: kata\n": `runtime: "kata" is not a runtime`,
		"tenants:\n  - {name: a, token_sha256: " + tok + ", runtime: crun}\n":                     `tenants[0].runtime: "crun" is not a runtime`,
		"tenants:\n  - {name: a, token_sha256: " + tok + ", runtimes: [runc, kata]}\n":            `tenants[0].runtimes[1]: "kata" is not a runtime`,
		"runtime: gvisor\ntenants:\n  - {name: a, token_sha256: " + tok + ", runtimes: [runc]}\n": `its default runtime "gvisor" is not among its runtimes [runc]`,
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want one saying %q", in, err, want)
		}
	}
}
