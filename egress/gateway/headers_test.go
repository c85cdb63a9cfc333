package gateway

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A sandbox's own headers: checked at creation, sent as secrets are (named
// in its status, never shown), replaced by a change that names them and
// kept by one that does not, and kept across a restart.
func TestOwnHeaders(t *testing.T) {
	g := newGateway(t, "egress: {allow: ['*']}")
	for _, tc := range []struct {
		h    sandbox.EgressHeader
		want string
	}{
		{sandbox.EgressHeader{Host: "10.0.0.0/8", Name: "X-A", Value: "v"}, "an address range"},
		{sandbox.EgressHeader{Host: "a.test", Name: "Bad Name", Value: "v"}, "is not a header name"},
		{sandbox.EgressHeader{Host: "a.test", Name: "X-A", Value: "two\nlines"}, "line break"},
		{sandbox.EgressHeader{Host: "a.test", Name: "X-A", Value: ""}, "empty value"},
		{sandbox.EgressHeader{Host: "http://a.test", Name: "X-A", Value: "v"}, "has a scheme"},
	} {
		spec := sandbox.Spec{Network: "proxy", Egress: &sandbox.EgressSpec{Headers: []sandbox.EgressHeader{tc.h}}}
		if err := g.Prepare(AdminTenant, &spec); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.h, err, tc.want)
		}
	}
	spec := sandbox.Spec{Network: "bridge", Egress: &sandbox.EgressSpec{Headers: []sandbox.EgressHeader{{Host: "a.test", Name: "X-A", Value: "v"}}}}
	if err := g.Prepare(AdminTenant, &spec); err == nil {
		t.Error("headers on a bridge sandbox were taken")
	}

	dir := t.TempDir()
	cfg := parseCfg(t, "egress: {allow: ['*']}")
	g1, err := New(cfg, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	info := proxyInfo(t, AdminTenant, "hdr", &sandbox.EgressSpec{Open: true, Headers: []sandbox.EgressHeader{{Host: "api.test", Name: "X-Token", Value: "s3cret"}}})
	ctx := context.Background()
	st, err := g1.Network(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Secrets, []string{"header:X-Token@api.test"}) {
		t.Fatalf("secrets of a sandbox with its own header: %v", st.Secrets)
	}
	// A change without headers keeps them; one with replaces them.
	if st, err = g1.SetNetwork(ctx, info, Policy{Allow: []string{"api.test"}}); err != nil || !slices.Equal(st.Secrets, []string{"header:X-Token@api.test"}) {
		t.Fatalf("a change that names no headers: %v %v", st.Secrets, err)
	}
	next := []sandbox.EgressHeader{{Host: "*.other.test", Name: "X-Other", Value: "o"}}
	if st, err = g1.SetNetwork(ctx, info, Policy{Allow: []string{"api.test"}, Headers: &next}); err != nil || !slices.Equal(st.Secrets, []string{"header:X-Other@*.other.test"}) {
		t.Fatalf("a change that names headers: %v %v", st.Secrets, err)
	}
	bad := []sandbox.EgressHeader{{Host: "a.test", Name: "X", Value: ""}}
	if _, err := g1.SetNetwork(ctx, info, Policy{Allow: []string{"api.test"}, Headers: &bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a change with a bad header: %v", err)
	}
	g1.Close()

	g2, err := New(cfg, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	if st, err = g2.Network(ctx, info); err != nil || !slices.Equal(st.Secrets, []string{"header:X-Other@*.other.test"}) {
		t.Fatalf("after a restart: %v %v", st.Secrets, err)
	}
	var cleared []sandbox.EgressHeader
	if st, err = g2.SetNetwork(ctx, info, Policy{Allow: []string{"api.test"}, Headers: &cleared}); err != nil || len(st.Secrets) != 0 {
		t.Fatalf("headers cleared: %v %v", st.Secrets, err)
	}
	g2.Close()
	g3, err := New(cfg, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer g3.Close()
	if st, err = g3.Network(ctx, info); err != nil || len(st.Secrets) != 0 {
		t.Fatalf("cleared headers came back after a restart: %v %v", st.Secrets, err)
	}
}
