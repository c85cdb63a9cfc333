package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/sandbox"
)

// gvisorChecker is a backend that can say whether its engine runs gVisor.
type gvisorChecker interface {
	CheckGVisor(ctx context.Context) error
}

// checkGVisor warns at start when the config lets sandboxes ask for
// gVisor and the engine cannot run it, so that the operator hears of it
// before a tenant's create is refused. It never stops the start: the
// engine may gain runsc later (creates check again).
func checkGVisor(ctx context.Context, cfg *config.Config, b sandbox.Backend, log *slog.Logger) {
	wanted := cfg.Runtime == sandbox.RuntimeGVisor
	for _, t := range cfg.Tenants {
		wanted = wanted || t.Runtime == sandbox.RuntimeGVisor || slices.Contains(t.Runtimes, sandbox.RuntimeGVisor)
	}
	c, ok := b.(gvisorChecker)
	if !wanted || !ok {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.CheckGVisor(cctx); err != nil {
		log.Warn("the config names runtime gvisor, but gVisor sandboxes cannot be made", "err", err)
	}
}
