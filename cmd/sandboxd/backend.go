package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/containerd"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/host"
)

// autoPingTimeout is how long "auto" waits for a Docker engine before it
// falls back to the host backend.
const autoPingTimeout = 2 * time.Second

// deploymentOf is the deployment this sandboxd works for: the config's
// name, else one derived from the data dir (so two sandboxd with two data
// dirs on one engine never share sandboxes, and a restart keeps its own).
func deploymentOf(cfg *config.Config, dataDir string) (sandbox.Deployment, error) {
	d := sandbox.Deployment{Name: cfg.Deployment, AdoptUnlabelled: cfg.AdoptUnlabelledSandboxes}
	if d.Name == "" {
		name, err := sandbox.DeploymentForDataDir(dataDir)
		if err != nil {
			return d, err
		}
		d.Name = name
	}
	return d, sandbox.ValidateDeployment(d.Name)
}

// openBackend returns the named backend; "auto" (or "") is Docker when an
// engine responds to a ping in time, else the host backend.
func openBackend(ctx context.Context, name, dataDir, agentBin string, cfg *config.Config, log *slog.Logger) (sandbox.Backend, error) {
	dep, err := deploymentOf(cfg, dataDir)
	if err != nil {
		return nil, err
	}
	switch name {
	case "docker":
		return newDocker(agentBin, cfg, dep, log)
	case "host":
		return newHost(dataDir, agentBin, dep, log)
	case "kubernetes":
		return newKubernetes(cfg, dep, log)
	case "containerd":
		return newContainerd(dataDir, agentBin, cfg, dep, log)
	case "", "auto":
	default:
		return nil, usagef("--backend %q is not known; use auto, docker, host, containerd or kubernetes", name)
	}
	d, err := newDocker(agentBin, cfg, dep, log)
	if err != nil {
		log.Info("backend auto: Docker backend unusable, using the host backend", "err", err)
		return newHost(dataDir, agentBin, dep, log)
	}
	pctx, cancel := context.WithTimeout(ctx, autoPingTimeout)
	defer cancel()
	if err := d.Ping(pctx); err != nil {
		d.Close()
		log.Info("backend auto: no Docker engine answers, using the host backend", "err", err)
		return newHost(dataDir, agentBin, dep, log)
	}
	log.Info("backend auto: a Docker engine answers, using the docker backend")
	return d, nil
}

func newDocker(agentBin string, cfg *config.Config, dep sandbox.Deployment, log *slog.Logger) (*docker.Backend, error) {
	opts := []docker.Option{
		docker.WithDeployment(dep),
		docker.WithAgentBinary(agentBin),
		docker.WithDefaultImage(cfg.DefaultImage),
		docker.WithLogger(log.With("backend", "docker")),
	}
	if len(cfg.Docker.ExtraCaps) > 0 {
		opts = append(opts, docker.WithExtraCaps(cfg.Docker.ExtraCaps...))
	}
	return docker.New(opts...)
}

func newHost(dataDir, agentBin string, dep sandbox.Deployment, log *slog.Logger) (*host.Backend, error) {
	return host.New(dataDir, host.WithDeployment(dep), host.WithAgentBinary(agentBin), host.WithLogger(log.With("backend", "host")))
}

func newContainerd(dataDir, agentBin string, cfg *config.Config, dep sandbox.Deployment, log *slog.Logger) (*containerd.Backend, error) {
	c := cfg.Containerd
	opts := []containerd.Option{
		containerd.WithDeployment(dep),
		containerd.WithAgentBinary(agentBin),
		containerd.WithDataDir(dataDir),
		containerd.WithDefaultImage(cfg.DefaultImage),
		containerd.WithLogger(log.With("backend", "containerd")),
		containerd.WithExtraCaps(cfg.Docker.ExtraCaps...),
	}
	if c.Address != "" {
		opts = append(opts, containerd.WithAddress(c.Address))
	}
	if c.Namespace != "" {
		opts = append(opts, containerd.WithNamespace(c.Namespace))
	}
	if c.Snapshotter != "" {
		opts = append(opts, containerd.WithSnapshotter(c.Snapshotter))
	}
	if c.Runtime != "" {
		opts = append(opts, containerd.WithRuntime(c.Runtime))
	}
	if c.Runsc != "" {
		opts = append(opts, containerd.WithRunsc(c.Runsc))
	}
	return containerd.New(opts...)
}
