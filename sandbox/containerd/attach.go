package containerd

import (
	"context"
	"io"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/internal/logcap"
)

const (
	// stderrCap bounds how much of one attach's stderr reaches the log.
	stderrCap = 64 << 10
	// closeGrace is how long Close lets `sandbox-agent attach` end on its
	// own after stdin closes, and then after SIGKILL.
	closeGrace = 5 * time.Second
)

// AttachAgent execs `sandbox-agent attach` in the sandbox's task with its
// stdio on FIFOs (no TTY: the stream is a clean byte pipe) and returns its
// stdin and stdout as one stream; stderr goes to the log.
func (b *Backend) AttachAgent(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	ctx = b.nsCtx(ctx)
	c, err := b.load(ctx, id)
	if err != nil {
		return nil, err
	}
	t, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return nil, b.notAttachable(ctx, c, id)
	}
	if err != nil {
		return nil, engineErr("find the task of sandbox "+id, err)
	}
	st, err := t.Status(ctx)
	if err == nil && (st.Status == containerd.Paused || st.Status == containerd.Pausing) {
		return nil, errdefs.FailedPrecondition("sandbox %s is paused; resume it (ctr -n %s task resume %s%s) and retry", id, b.ns, NamePrefix, id)
	}
	if err != nil || st.Status != containerd.Running {
		return nil, b.notAttachable(ctx, c, id)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return nil, engineErr("read the spec of sandbox "+id, err)
	}
	mounted := false
	for _, m := range spec.Mounts {
		mounted = mounted || m.Destination == docker.AgentPath
	}
	if !mounted || spec.Process == nil {
		return nil, errdefs.FailedPrecondition("sandbox %s has no sandbox-agent mounted at %s, so sandboxd cannot reach it; create sandboxes through sandboxd", id, docker.AgentPath)
	}
	ps := *spec.Process
	ps.Args = []string{docker.AgentPath, "attach"}
	ps.Terminal = false

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := logcap.New(b.log.With("sandbox", id, "stream", "agent stderr"), stderrCap)
	p, err := t.Exec(ctx, "attach-"+newID(), &ps, cio.NewCreator(cio.WithStreams(inR, outW, stderr), cio.WithFIFODir(b.fifoDir())))
	if err != nil {
		inW.Close()
		return nil, engineErr("exec the agent in sandbox "+id, err)
	}
	// The exec outlives ctx (the request that opened the pipe); Close ends it.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	exited, err := p.Wait(wctx)
	if err == nil {
		err = p.Start(ctx)
	}
	if err != nil {
		cancel()
		inW.Close()
		dctx, dcancel := context.WithTimeout(wctx, closeGrace)
		_, _ = p.Delete(dctx, containerd.WithProcessKill)
		dcancel()
		return nil, engineErr("start the agent exec in sandbox "+id, err)
	}
	e := &execPipe{p: p, in: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	go e.reap(wctx, exited, outW)
	return e, nil
}

// notAttachable says why a sandbox whose task does not run has no agent to
// reach: a hibernated one is resumed, a stopped one made again.
func (b *Backend) notAttachable(ctx context.Context, c containerd.Container, id string) error {
	if l, err := c.Labels(ctx); err == nil {
		if state, _, err := b.state(ctx, c, l); err == nil && state == sandbox.StateHibernated {
			return errdefs.FailedPrecondition("sandbox %s is hibernated; resume it and retry", id)
		}
	}
	return errdefs.FailedPrecondition("sandbox %s is not running; delete it and create a new one", id)
}

// execPipe is one `sandbox-agent attach` exec. Its one goroutine (reap)
// waits for the exec to exit, lets the FIFO copies drain, ends the read side
// and deletes the exec. Close ends stdin (the agent's attach then exits on
// its own), kills the exec if it lingers, and waits for reap.
//
// The exec's context is not the request's: it lives until Close.
type execPipe struct {
	p      containerd.Process
	in     *io.PipeWriter
	out    *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
	// code is the exec's exit code, written by reap before done closes.
	code uint32
}

func (e *execPipe) reap(ctx context.Context, exited <-chan containerd.ExitStatus, outW *io.PipeWriter) {
	defer close(e.done)
	st := <-exited
	e.code = st.ExitCode()
	e.p.IO().Wait() // stdout fully copied (or its reader closed)
	outW.CloseWithError(io.EOF)
	dctx, cancel := context.WithTimeout(ctx, closeGrace)
	defer cancel()
	// Delete closes the FIFOs only when it succeeds; when the task went
	// first (the sandbox was removed), they are ours to remove.
	if _, err := e.p.Delete(dctx); err != nil {
		e.p.IO().Cancel()
		e.p.IO().Close()
	}
}

func (e *execPipe) Read(b []byte) (int, error)  { return e.out.Read(b) }
func (e *execPipe) Write(b []byte) (int, error) { return e.in.Write(b) }

func (e *execPipe) Close() error {
	e.closed.Do(func() {
		e.in.Close()
		e.out.CloseWithError(io.ErrClosedPipe) // unblocks the stdout copy
		// The shim holds the stdin FIFO open itself, so the exec sees EOF
		// only when asked to close it; `sandbox-agent attach` then ends.
		cctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		_ = e.p.CloseIO(cctx, containerd.WithStdinCloser)
		cancel()
		if e.wait() {
			return
		}
		kctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		_ = e.p.Kill(kctx, syscall.SIGKILL)
		cancel()
		if e.wait() {
			return
		}
		// containerd does not respond: stop waiting and drop the FIFOs.
		e.cancel()
		e.p.IO().Cancel()
		e.wait()
	})
	<-e.done
	return nil
}

// wait waits for reap for at most closeGrace.
func (e *execPipe) wait() bool {
	select {
	case <-e.done:
		return true
	case <-time.After(closeGrace):
		return false
	}
}
