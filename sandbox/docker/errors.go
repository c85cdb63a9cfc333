package docker

import (
	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/sandbox"
)

var engine = sandbox.Engine{Name: "the Docker engine", Hint: "DOCKER_HOST", Unreachable: client.IsErrConnectionFailed}

// engineErr classifies a Docker engine error (see sandbox.Engine.Err).
func engineErr(op string, err error) error { return engine.Err(op, err) }
