package containerd

import (
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/sandbox"
)

// gRPC reports a dead containerd socket as Unavailable.
var engine = sandbox.Engine{Name: "containerd", Hint: "containerd.address", Unreachable: cerrdefs.IsUnavailable}

// engineErr classifies a containerd error (see sandbox.Engine.Err).
func engineErr(op string, err error) error { return engine.Err(op, err) }
