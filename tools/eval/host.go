package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
)

// maxSocketPath keeps a unix socket path under the kernel's 108-byte limit.
const maxSocketPath = 100

// LocalAgent runs kernels on the host for conversations without a sandbox:
// a `sandbox-agent attach` child connected to an agent daemon whose socket
// lies under the host-kernels folder. The daemon (started by attach when
// none runs) outlives sandboxd, so host kernels survive a restart as
// sandbox kernels do.
//
// Goroutines: one waits for the attach child of the current session. Close
// ends the session and waits for the child; the daemon and its kernels keep
// running.
type LocalAgent struct {
	bin    string
	root   string
	socket string

	// mu guards client and child.
	mu     sync.Mutex
	client *agent.Client
	child  *exec.Cmd
	exited chan struct{}
}

var _ HostAgent = (*LocalAgent)(nil)

// NewLocalAgent keeps host kernels under root and talks to them through the
// sandbox-agent binary bin.
func NewLocalAgent(bin, root string) (*LocalAgent, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the host kernels folder %s: %w", abs, err)
	}
	sock := filepath.Join(abs, "agent.sock")
	if len(sock) > maxSocketPath {
		sum := sha256.Sum256([]byte(abs))
		dir := filepath.Join(os.TempDir(), "sandboxd-hk-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("cannot create the host kernels socket folder %s: %w", dir, err)
		}
		sock = filepath.Join(dir, "agent.sock")
	}
	return &LocalAgent{bin: bin, root: abs, socket: sock}, nil
}

// Root is the host folder of kernel programs and working folders.
func (l *LocalAgent) Root() string { return l.root }

// Socket is the agent daemon's socket (tests stop the daemon through it).
func (l *LocalAgent) Socket() string { return l.socket }

// Agent returns the session to the host agent, attaching anew when the last
// one ended.
func (l *LocalAgent) Agent(ctx context.Context) (*agent.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		select {
		case <-l.client.Done():
			l.closeLocked()
		default:
			return l.client, nil
		}
	}
	if l.bin == "" {
		return nil, errdefs.FailedPrecondition("host kernels need the sandbox-agent binary; build it with `make build`")
	}
	cmd := exec.Command(l.bin, "attach", "--socket", l.socket)
	cmd.Dir = l.root
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 3 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, errdefs.FailedPrecondition("cannot run the sandbox agent %s for host kernels: %v", l.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c, err := agent.NewClient(ctx, &pipe{r: out, w: in})
	if err != nil {
		in.Close()
		<-exited
		return nil, err
	}
	l.client, l.child, l.exited = c, cmd, exited
	return c, nil
}

// Close ends the session; the host agent daemon and its kernels keep running.
func (l *LocalAgent) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked()
}

func (l *LocalAgent) closeLocked() {
	if l.client == nil {
		return
	}
	l.client.Close()
	select {
	case <-l.exited:
	case <-time.After(5 * time.Second):
		_ = l.child.Process.Kill()
		<-l.exited
	}
	l.client, l.child, l.exited = nil, nil, nil
}

// pipe joins the attach child's stdout and stdin into one stream.
type pipe struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (p *pipe) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipe) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipe) Close() error {
	p.w.Close()
	return nil
}
