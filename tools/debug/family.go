package debug

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is the debug tool as a tool family. Sessions belong to the
// sandbox agents; sandboxd keeps only their TTL timers, stopped at Close.
func Family() family.Family { return &fam{} }

type fam struct {
	family.Base
	sv *Supervisor // nil while debug is off
}

func (*fam) Name() string { return "debug" }

func (*fam) Validate(cfg *config.Config) error { return cfg.Debug.Check() }

func (f *fam) Register(s *family.Setup) error {
	d := s.Config.Debug
	if d.Disabled {
		s.Omit("debug supervision is off in this sandboxd's config (debug.disabled: true); only an operator can turn it on", "debug")
		return nil
	}
	f.sv = NewSupervisor(WithSessionTTL(d.TTL()), WithLogger(s.Log.With("tool", "debug")))
	s.Register(New(f.sv))
	return nil
}

func (f *fam) Collector() prometheus.Collector {
	if f.sv == nil {
		return metrics.DebugSessions(nil)
	}
	return metrics.DebugSessions(f.sv.Sessions)
}

func (f *fam) Close() error {
	if f.sv != nil {
		f.sv.Close()
	}
	return nil
}
