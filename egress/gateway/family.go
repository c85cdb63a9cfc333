package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is network mode "proxy" in the daemon's one family shape: its
// config section checked at load, the gateway built at Register with a
// hook on every agent pipe and a service for the API, its series, and its
// connections cut at Close. It registers no tools: what it serves is the
// sandbox's network, to every program in it.
func Family() family.Family { return &fam{} }

type fam struct {
	family.Base
	g *Gateway
}

func (*fam) Name() string { return "egress" }

func (*fam) Validate(cfg *config.Config) error { return Validate(cfg) }

func (f *fam) Register(s *family.Setup) error {
	g, err := New(s.Config, Options{DataDir: s.DataDir, Log: s.Log.With("component", "egress"), Annotate: s.Annotate, Events: s.Events})
	if err != nil {
		return err
	}
	f.g = g
	s.AttachHook(g.Attach)
	// A proxy sandbox's programs need its pipe whether or not a tool is
	// called: after a restart, the pipe opens at the next refresh.
	s.KeepPipe(func(i sandbox.Info) bool { return sandbox.NetworkOf(i) == sandbox.NetworkProxy })
	s.Serve(g)
	return nil
}

func (f *fam) Collector() prometheus.Collector {
	if f.g == nil {
		return Collector()
	}
	return f.g.metrics
}

func (f *fam) Close() error {
	if f.g == nil {
		return nil
	}
	return f.g.Close()
}
