package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// ExecAPI is the part of the Docker client a fresh exec needs.
type ExecAPI interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (HijackedConn, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

// HijackedConn is what ContainerExecAttach hands back, reduced to reading
// the multiplexed output and closing.
type HijackedConn interface {
	Reader() io.Reader
	Close()
}

// execCap bounds what one peer exec may return; the benchmark reads 4 KiB.
const execCap = 1 << 20

// Exec runs cmd in container as a fresh `docker exec` does: create the
// exec, attach to it, read stdout and stderr to the end, then inspect it for
// the exit code. It is the peer that sandboxd's pipe is measured against.
func Exec(ctx context.Context, api ExecAPI, containerID string, cmd ...string) (stdout, stderr []byte, exit int, err error) {
	ex, err := api.ContainerExecCreate(ctx, containerID, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("docker exec create in %s: %w", containerID, err)
	}
	conn, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("docker exec attach in %s: %w", containerID, err)
	}
	defer conn.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&capWriter{w: &out, left: execCap}, &capWriter{w: &errb, left: execCap}, conn.Reader()); err != nil {
		return nil, nil, 0, fmt.Errorf("docker exec output in %s: %w", containerID, err)
	}
	in, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("docker exec inspect in %s: %w", containerID, err)
	}
	if in.Running {
		return nil, nil, 0, fmt.Errorf("docker exec in %s: the output ended but the process still runs", containerID)
	}
	return out.Bytes(), errb.Bytes(), in.ExitCode, nil
}

// capWriter keeps at most left bytes and fails past that, so a runaway
// command cannot fill memory.
type capWriter struct {
	w    io.Writer
	left int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		return 0, fmt.Errorf("more than %d bytes of output", execCap)
	}
	c.left -= len(p)
	return c.w.Write(p)
}

// DockerExec adapts *client.Client to ExecAPI.
type DockerExec struct{ *client.Client }

var _ ExecAPI = DockerExec{}

// ContainerExecAttach attaches to an exec.
func (d DockerExec) ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (HijackedConn, error) {
	r, err := d.Client.ContainerExecAttach(ctx, execID, config)
	if err != nil {
		return nil, err
	}
	return hijacked{r.Reader, r.Close}, nil
}

type hijacked struct {
	r     io.Reader
	close func()
}

func (h hijacked) Reader() io.Reader { return h.r }
func (h hijacked) Close()            { h.close() }
