package bench

import (
	"context"
	"os"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// AgentBinary is $SANDBOXD_AGENT_BIN, or a sandbox-agent built into dir.
func AgentBinary(dir string) (string, error) {
	if bin := os.Getenv("SANDBOXD_AGENT_BIN"); bin != "" {
		return bin, nil
	}
	return sandboxtest.BuildAgent(dir)
}

// DockerManager starts a sandbox manager on the Docker engine with image
// as its default, the agent from AgentBinary(dir). The returned close
// undoes it (the manager, then the backend); on error nothing is left.
func DockerManager(ctx context.Context, dir, image string) (*docker.Backend, *sandbox.Manager, func(), error) {
	agentBin, err := AgentBinary(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(image))
	if err != nil {
		return nil, nil, nil, err
	}
	m := sandbox.NewManager(b)
	if err := m.Start(ctx); err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	return b, m, func() { m.Close(); b.Close() }, nil
}
