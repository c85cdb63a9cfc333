package eval

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/agent/jail"
	sbxconfig "github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// hostKernelsStopWait bounds stopping an ended run's host kernels.
const hostKernelsStopWait = 15 * time.Second

// Family is eval as a tool family. Conversations without a sandbox get
// kernels on the host, confined, through a local sandbox-agent under
// DATA/host-kernels: by default only where no tenants are configured.
//
// Close detaches from the kernels first, then ends the host agent's
// session (kernels in sandboxes keep running for the next start).
func Family() family.Family { return &fam{} }

type fam struct {
	family.Base
	log  *slog.Logger
	runs family.Runs
	t    *Tool       // nil while eval is off
	host *LocalAgent // nil without host kernels
}

func (*fam) Name() string { return "eval" }

func (*fam) Validate(cfg *sbxconfig.Config) error { return cfg.Eval.Validate() }

func (f *fam) Register(s *family.Setup) error {
	ec := s.Config.Eval
	if ec.Disabled {
		s.Omit("eval is off in this sandboxd's config (eval.disabled: true); only an operator can turn it on", "eval")
		return nil
	}
	f.log, f.runs = s.Log, s.Runs
	ec = ec.WithDefaults()
	opts := []Option{
		WithBudget(ec.Budget.D(), ec.MaxBudget.D()),
		WithOutputCap(ec.MaxOutputBytes),
		WithInterpreters(ec.Python, ec.Node),
		WithStateDir(filepath.Join(s.DataDir, "kernel-places")),
	}
	host := ec.HostKernels(len(s.Config.Tenants) > 0)
	if err := jail.Check(); host && err != nil {
		// A host kernel never runs unconfined: without a jail, eval is
		// only where a sandbox is.
		s.Log.Warn("host kernels are off", "reason", err.Error())
		host = false
	}
	if host {
		j := ec.Jail
		la, err := NewLocalAgent(s.AgentBinary, filepath.Join(s.DataDir, "host-kernels"), WithConfinement(Confinement{
			FirstUID: j.UIDFirst, UIDCount: j.UIDCount, MemoryBytes: int64(j.MemoryMB) << 20, Pids: j.Pids, CPUs: j.CPUs,
			FileBytes: int64(j.FileSizeMB) << 20, Network: j.Network, ReadOnly: j.ReadOnly,
		}))
		if err != nil {
			return err
		}
		f.host = la
		opts = append(opts, WithHost(la))
	}
	f.t = New(s.Tools, opts...)
	s.Register(f.t)
	return nil
}

func (f *fam) Collector() prometheus.Collector {
	if f.t == nil {
		return metrics.Kernels(Languages(), nil)
	}
	return metrics.Kernels(Languages(), f.t.Kernels)
}

// RunEnded stops the host kernels of r's conversation once no other run of
// it is live: a host kernel lives as long as its conversation has a run.
func (f *fam) RunEnded(r tools.Run) {
	if f.host == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostKernelsStopWait)
	defer cancel()
	for _, o := range f.runs.List(ctx, r.Tenant) {
		if o.ID != r.ID && o.Conversation == r.Conversation && r.Conversation != "" {
			return
		}
	}
	if err := f.t.EndRun(ctx, r); err != nil {
		f.log.Warn("host kernels of an ended run were not stopped", "run", r.ID, "err", err)
	}
}

func (f *fam) Close() error {
	if f.t != nil {
		f.t.Close()
	}
	if f.host != nil {
		f.host.Close()
	}
	return nil
}

// ToolOf is the eval tool a family made by Family registered, for the
// code interpreter API (package e2b/interp), which runs cells in the same
// kernels; nil before Register, when eval is off, or for another family.
func ToolOf(f family.Family) *Tool {
	if e, ok := f.(*fam); ok {
		return e.t
	}
	return nil
}
