package main

import (
	"path/filepath"

	"github.com/sandboxd/sandboxd/tools/eval"
)

// wireEval registers the eval tool. Conversations without a sandbox get
// kernels on the host through a local sandbox-agent under
// DATA/host-kernels, unless the config turns that off.
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
	}
	if ec.HostKernels() {
		host, err := eval.NewLocalAgent(w.agentBin, filepath.Join(w.dataDir, "host-kernels"))
		if err != nil {
			return err
		}
		w.closers = append(w.closers, host.Close)
		opts = append(opts, eval.WithHost(host))
	}
	t := eval.New(w.registry, opts...)
	w.registry.Register(t)
	w.stats.kernels = t.Kernels
	// Closers run in reverse: detach from the kernels before the host session ends.
	w.closers = append(w.closers, t.Close)
	return nil
}
