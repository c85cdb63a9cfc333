package kubernetes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox/internal/logcap"
)

// stderrCap bounds how much of one attach's stderr reaches the log.
const stderrCap = 64 << 10

// closeGrace is how long Close lets `sandbox-agent attach` see the end of
// its stdin and exit before the connection is cut.
const closeGrace = 2 * time.Second

// AttachAgent execs `sandbox-agent attach` in the sandbox container through
// the API server and returns its stdin and stdout as one byte stream (no
// TTY); stderr goes to the log.
func (b *Backend) AttachAgent(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	o, err := b.find(ctx, id)
	if err != nil {
		return nil, err
	}
	p := o.pod
	switch {
	case o.claim != nil:
		return nil, errdefs.FailedPrecondition("sandbox %s is hibernated (its pod was deleted or ended, its workspace claim %s is kept); resume it", id, o.claim.Name)
	case !containerRunning(p) || p.Status.Phase != corev1.PodRunning:
		return nil, errdefs.FailedPrecondition("sandbox %s is not running (%s); delete it and create a new one", id, whyNotRunning(p))
	}
	argv := []string{AgentPath, "attach"}
	if claimOf(p) != "" {
		argv = append(argv, "--state-dir", AgentStateDir)
	}
	ex, err := b.executor(p.Name, argv, true)
	if err != nil {
		return nil, err
	}
	return newExecPipe(ex, logcap.New(b.log.With("sandbox", id, "stream", "agent stderr"), stderrCap), b.log.With("sandbox", id)), nil
}

// Exec runs argv in sandbox id's container through the API server, one
// fresh exec per call (tests and benchmarks compare it with the pipe).
func (b *Backend) Exec(ctx context.Context, id string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := b.find(ctx, id)
	if err != nil {
		return err
	}
	if o.claim != nil {
		return errdefs.FailedPrecondition("sandbox %s is hibernated (its workspace claim %s is kept, its pod is not); resume it", id, o.claim.Name)
	}
	p := o.pod
	ex, err := b.executor(p.Name, argv, stdin != nil)
	if err != nil {
		return err
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}); err != nil {
		return apiErr("exec in pod "+p.Name, err)
	}
	return nil
}

// executor is an exec of argv in the sandbox container: WebSocket first,
// SPDY when the server (or a proxy on the way) cannot upgrade to it.
func (b *Backend) executor(pod string, argv []string, stdin bool) (remotecommand.Executor, error) {
	if b.rest == nil {
		return nil, errdefs.FailedPrecondition("this kubernetes backend has no API server configuration to exec with; construct it with a rest.Config")
	}
	req := b.cs.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(b.namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: ContainerName,
			Command:   argv,
			Stdin:     stdin,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", req.URL().String())
	if err != nil {
		return nil, errdefs.Internal("cannot prepare a WebSocket exec into pod %s: %v", pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", req.URL())
	if err != nil {
		return nil, errdefs.Internal("cannot prepare an SPDY exec into pod %s: %v", pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, errdefs.Internal("cannot prepare an exec into pod %s: %v", pod, err)
	}
	return ex, nil
}

// execPipe is the attach exec's stdio as one stream. Its goroutine runs the
// exec until it ends (the process exits, the pod goes, or Close cancels
// it), then ends the read side with the reason. Close ends stdin first so
// the agent's attach exits cleanly, discards what it still writes (closing
// the read side instead would fail client-go's copy and log an error),
// cuts the connection after closeGrace, and waits for the goroutine.
type execPipe struct {
	stdin  *io.PipeWriter
	out    *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

func newExecPipe(ex remotecommand.Executor, stderr io.Writer, log *slog.Logger) *execPipe {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	// The exec outlives the request that opened it.
	ctx, cancel := context.WithCancel(context.Background())
	p := &execPipe{stdin: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		if err == nil || errors.Is(err, context.Canceled) {
			err = io.EOF
		} else {
			log.Debug("agent exec ended", "err", err)
		}
		outW.CloseWithError(err)
		inR.CloseWithError(io.ErrClosedPipe)
	}()
	return p
}

func (p *execPipe) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *execPipe) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *execPipe) Close() error {
	p.closed.Do(func() {
		_ = p.stdin.Close()
		go func() { _, _ = io.Copy(io.Discard, p.out) }() // ends when the goroutine closes the write side
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
		p.cancel()
	})
	<-p.done
	return nil
}
