package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/agent/jail"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// wireEval registers the eval tool. Conversations without a sandbox get
// kernels on the host, confined, through a local sandbox-agent under
// DATA/host-kernels: by default only where no tenants are configured.
func wireEval(w *wiring) error {
	ec := w.cfg.Eval
	if ec.Disabled {
		w.registry.Omit("eval is off in this sandboxd's config (eval.disabled: true); only an operator can turn it on", "eval")
		return nil
	}
	if err := ec.Validate(); err != nil {
		return err
	}
	ec = ec.WithDefaults()
	opts := []eval.Option{
		eval.WithBudget(ec.Budget.D(), ec.MaxBudget.D()),
		eval.WithOutputCap(ec.MaxOutputBytes),
		eval.WithInterpreters(ec.Python, ec.Node),
		eval.WithStateDir(filepath.Join(w.dataDir, "kernel-places")),
	}
	var t *eval.Tool
	host := ec.HostKernels(len(w.cfg.Tenants) > 0)
	if err := jail.Check(); host && err != nil {
		// A host kernel never runs unconfined: without a jail, eval is
		// only where a sandbox is.
		w.log.Warn("host kernels are off", "reason", err.Error())
		host = false
	}
	if host {
		j := ec.Jail
		la, err := eval.NewLocalAgent(w.agentBin, filepath.Join(w.dataDir, "host-kernels"), eval.WithConfinement(eval.Confinement{
			FirstUID: j.UIDFirst, UIDCount: j.UIDCount, MemoryBytes: int64(j.MemoryMB) << 20, Pids: j.Pids, CPUs: j.CPUs,
			FileBytes: int64(j.FileSizeMB) << 20, Network: j.Network, ReadOnly: j.ReadOnly,
		}))
		if err != nil {
			return err
		}
		w.closers = append(w.closers, la.Close)
		opts = append(opts, eval.WithHost(la))
		// A host kernel lives as long as its conversation has a run.
		w.runEnd = append(w.runEnd, func(r tools.Run) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			for _, o := range w.runs.List(ctx, r.Tenant) {
				if o.ID != r.ID && (o.Conversation == r.Conversation && r.Conversation != "") {
					return
				}
			}
			if err := t.EndRun(ctx, r); err != nil {
				w.log.Warn("host kernels of an ended run were not stopped", "run", r.ID, "err", err)
			}
		})
	}
	t = eval.New(w.registry, opts...)
	w.registry.Register(t)
	w.stats.kernels = t.Kernels
	// Closers run in reverse: detach from the kernels before the host session ends.
	w.closers = append(w.closers, t.Close)
	return nil
}
