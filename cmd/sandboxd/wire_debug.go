package main

import (
	"github.com/sandboxd/sandboxd/tools/debug"
)

// wireDebug registers the debug tool unless the config turns debug
// supervision off. Sessions belong to the sandbox agents; at shutdown only
// the TTL timers stop.
func wireDebug(w *wiring) error {
	d := w.cfg.Debug
	if d.Disabled {
		w.registry.Omit("debug supervision is off in this sandboxd's config (debug.disabled: true); only an operator can turn it on", "debug")
		return nil
	}
	if err := d.Check(); err != nil {
		return err
	}
	sv := debug.NewSupervisor(debug.WithSessionTTL(d.TTL()), debug.WithLogger(w.log.With("tool", "debug")))
	w.registry.Register(debug.New(sv))
	w.closers = append(w.closers, sv.Close)
	w.stats.debugSessions = sv.Sessions
	return nil
}
