package main

import (
	"github.com/sandboxd/sandboxd/e2b"
	"github.com/sandboxd/sandboxd/e2b/interp"
	"github.com/sandboxd/sandboxd/tools/eval"
)

// e2bPorts are the ports of every E2B sandbox that sandboxd serves itself:
// the code interpreter's (49999), on the eval family's kernels (every
// call answered with why when eval is off). The families have registered
// by now, so the eval tool exists.
func (lv *leaves) e2bPorts() map[int]e2b.PortHandler {
	var kernels *eval.Tool
	for _, f := range lv.list {
		if t := eval.ToolOf(f); t != nil {
			kernels = t
		}
	}
	return map[int]e2b.PortHandler{
		e2b.CodeInterpreterPort: interp.New(lv.mgr, kernels, interp.WithUser(lv.cfg.E2B.User), interp.WithLogger(lv.log.With("component", "e2b-interp"))),
	}
}
