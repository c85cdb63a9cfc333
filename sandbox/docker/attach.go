package docker

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path"
	"sync"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/internal/logcap"
)

// stderrCap bounds how much of one attach's stderr reaches the log.
const stderrCap = 64 << 10

// AttachAgent execs `sandbox-agent attach` in the sandbox and returns its
// stdin and demultiplexed stdout as one stream; stderr goes to the log.
func (b *Backend) AttachAgent(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	c, err := b.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.State != nil && c.State.Paused {
		return nil, errdefs.FailedPrecondition("sandbox %s is paused; unpause it (docker unpause %s%s) and retry", id, NamePrefix, id)
	}
	if c.State == nil || !c.State.Running {
		if mapStateOf(c) == sandbox.StateHibernated || b.recordOf(ctx, HibernateVolumePrefix, id) != "" {
			return nil, errdefs.FailedPrecondition("sandbox %s is hibernated; resume it (POST /v1/sandboxes/%s/resume) and retry", id, id)
		}
		return nil, errdefs.FailedPrecondition("sandbox %s is not running; resume it (POST /v1/sandboxes/%s/resume), or delete it and create a new one", id, id)
	}
	agent := AgentPath
	if !hasAgentMount(c) {
		if agent, err = b.adopt(ctx, c.ID); err != nil {
			return nil, err
		}
	}
	ex, err := b.cli.ContainerExecCreate(ctx, c.ID, container.ExecOptions{
		Cmd:          []string{agent, "attach"},
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return nil, engineErr("exec the agent in sandbox "+id, err)
	}
	resp, err := b.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, engineErr("attach to the agent exec in sandbox "+id, err)
	}
	return newExecPipe(resp, logcap.New(b.log.With("sandbox", id, "stream", "agent stderr"), stderrCap)), nil
}

// hasAgentMount tells a container we created (agent bind-mounted) from one
// that was made elsewhere and carries our labels.
func hasAgentMount(c container.InspectResponse) bool {
	for _, m := range c.Mounts {
		if m.Destination == AgentPath {
			return true
		}
	}
	return false
}

// adopt copies the agent into a container that lacks the mount. The copy is
// named by its digest, so a newer agent never overwrites a running one.
func (b *Backend) adopt(ctx context.Context, cid string) (string, error) {
	name := "sandbox-agent-" + b.agentSum
	dst := path.Join(AdoptedAgentDir, name)
	if st, err := b.cli.ContainerStatPath(ctx, cid, dst); err == nil && st.Size == b.agentSize {
		return dst, nil
	}
	f, err := os.Open(b.agentPath)
	if err != nil {
		return "", errdefs.FailedPrecondition("the sandbox-agent binary %s cannot be read (%v); build it with `make build`", b.agentPath, err)
	}
	defer f.Close()

	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		dir := path.Base(AdoptedAgentDir)
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dir + "/" + name, Mode: 0o755, Size: b.agentSize})
		}
		if err == nil {
			_, err = io.Copy(tw, io.LimitReader(f, b.agentSize))
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err = b.cli.CopyToContainer(ctx, cid, path.Dir(AdoptedAgentDir), pr, container.CopyToContainerOptions{})
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the writer if the copy failed early
	if err != nil {
		return "", engineErr("copy the agent into container "+cid[:12], err)
	}
	b.log.Info("agent copied into an adopted container", "container", cid[:12], "path", dst)
	return dst, nil
}

// execPipe is the attach exec's stdio: reads demultiplex the engine's
// stream in the reader's goroutine (stdout returned, stderr logged), writes
// go to the hijacked connection. It starts no goroutine; Close closes the
// connection, which ends a Read in progress.
type execPipe struct {
	resp   types.HijackedResponse
	out    *demuxReader
	closed sync.Once
}

func newExecPipe(resp types.HijackedResponse, stderr io.Writer) *execPipe {
	return &execPipe{resp: resp, out: newDemuxReader(resp.Reader, stderr)}
}

func (p *execPipe) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *execPipe) Write(b []byte) (int, error) { return p.resp.Conn.Write(b) }

func (p *execPipe) Close() error {
	p.closed.Do(p.resp.Close)
	return nil
}
