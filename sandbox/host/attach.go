package host

import (
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox/internal/logcap"
)

const (
	stderrCap = 64 << 10
	// exitGrace is how long a closed attach may take to exit before it is killed.
	exitGrace = 3 * time.Second
)

// AttachAgent runs `sandbox-agent attach --socket S` in the workspace; attach
// starts the sandbox's agent daemon when none runs. The daemon keeps its
// commit journals in the sandbox's folder beside the workspace (never in
// it), and refuses files with more than one hard link: here the workspace
// shares a file system with the machine, so a link made through shell
// could read back a file outside it.
func (b *Backend) AttachAgent(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	m, err := b.load(id)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(m.Workspace); err != nil || !st.IsDir() {
		return nil, errdefs.FailedPrecondition("the workspace %s of sandbox %s is gone; delete the sandbox and create a new one", m.Workspace, id)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, errdefs.ResourceExhausted("cannot make a pipe for the agent: %v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, errdefs.ResourceExhausted("cannot make a pipe for the agent: %v", err)
	}
	stderr := logcap.New(b.log.With("sandbox", id, "stream", "agent stderr"), stderrCap)
	cmd := exec.Command(b.agentPath, "attach", "--socket", m.Socket,
		"--state-dir", filepath.Join(b.root, id, "agent-state"), "--single-link-files")
	cmd.Dir = m.Workspace
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		cmd.Env = append(cmd.Env, k+"="+m.Env[k])
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	// Its own process group: a ^C meant for sandboxd must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Should the daemon inherit attach's stderr, Wait must not hang on it.
	cmd.WaitDelay = exitGrace
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, errdefs.FailedPrecondition("cannot run the agent %s: %v; build it with `make build`", b.agentPath, err)
	}
	p := &childPipe{cmd: cmd, in: inW, out: outR, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		stderr.Flush()
		close(p.exited)
	}()
	return p, nil
}

// childPipe is the attach process's stdio. One goroutine waits for the
// process; Close ends stdin, gives the process exitGrace to leave, kills it
// otherwise, and returns once it is reaped.
type childPipe struct {
	cmd    *exec.Cmd
	in     *os.File
	out    *os.File
	exited chan struct{}
	once   sync.Once
}

func (p *childPipe) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *childPipe) Write(b []byte) (int, error) { return p.in.Write(b) }

func (p *childPipe) Close() error {
	p.once.Do(func() {
		p.in.Close()
		select {
		case <-p.exited:
		case <-time.After(exitGrace):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		p.out.Close()
	})
	<-p.exited
	return nil
}
