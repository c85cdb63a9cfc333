package api

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox"
)

func TestRuntimeSpecFollowsTheTenantsPolicy(t *testing.T) {
	s := &Server{runtimePolicy: func(tenant string) RuntimePolicy {
		if tenant == "strict" {
			return RuntimePolicy{Default: "gvisor", Allowed: []string{"gvisor"}, ReadOnlyRoot: true}
		}
		return RuntimePolicy{}
	}}
	no := false
	for _, c := range []struct {
		tenant string
		req    CreateSandboxRequest
		want   string
		ro     bool
		err    string
	}{
		{tenant: "open", want: "runc"},
		{tenant: "open", req: CreateSandboxRequest{Runtime: "gvisor"}, want: "gvisor"},
		{tenant: "open", req: CreateSandboxRequest{Runtime: "kata"}, err: `runtime "kata" is not known`},
		{tenant: "strict", want: "gvisor", ro: true},
		{tenant: "strict", req: CreateSandboxRequest{ReadOnlyRoot: &no}, want: "gvisor"},
		{tenant: "strict", req: CreateSandboxRequest{Runtime: "runc"}, err: `tenant strict may not use runtime "runc"; ask for one of [gvisor]`},
	} {
		var spec sandbox.Spec
		err := s.runtimeSpec(c.tenant, c.req, &spec)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %+v: err %v, want one saying %q", c.tenant, c.req, err, c.err)
			}
		case err != nil:
			t.Errorf("%s %+v: %v", c.tenant, c.req, err)
		case spec.Runtime != c.want || spec.ReadOnlyRoot != c.ro:
			t.Errorf("%s %+v: runtime %q read-only %v, want %q %v", c.tenant, c.req, spec.Runtime, spec.ReadOnlyRoot, c.want, c.ro)
		}
	}
}
