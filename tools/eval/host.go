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
	"github.com/sandboxd/sandboxd/agent/jail"
	"github.com/sandboxd/sandboxd/errdefs"
)

// maxSocketPath keeps a unix socket path under the kernel's 108-byte limit.
const maxSocketPath = 100

// LocalAgent runs kernels on the host for conversations without a sandbox:
// a `sandbox-agent attach` child connected to an agent daemon whose socket
// lies under the host-kernels folder. The daemon (started by attach when
// none runs) outlives sandboxd, so host kernels survive a restart as
// sandbox kernels do. Every host kernel runs confined (`sandbox-agent
// jail`): a uid of its conversation's own, namespaces that show it only the
// system directories and its conversation's scratch, and the limits of
// Confinement.
//
// Goroutines: one waits for the attach child of the current session. Close
// ends the session and waits for the child; the daemon and its kernels keep
// running.
type LocalAgent struct {
	bin    string
	root   string
	socket string
	limits Confinement
	uids   *uidTable

	// mu guards client and child.
	mu     sync.Mutex
	client *agent.Client
	child  *exec.Cmd
	exited chan struct{}
}

var _ HostAgent = (*LocalAgent)(nil)

// Confinement is what a host kernel may use. Zero fields take the
// defaults of DefaultConfinement.
type Confinement struct {
	// FirstUID and UIDCount are the uids given to conversations, one each.
	FirstUID, UIDCount int
	MemoryBytes        int64
	Pids               int
	CPUs               float64
	FileBytes          int64
	// Network keeps the host's network; by default a kernel has only its
	// own loopback.
	Network bool
	// ReadOnly are more host paths a kernel sees read-only (an interpreter
	// installed outside /usr).
	ReadOnly []string
}

// DefaultConfinement: uids 900000 to 999999, 1 GiB of memory, 256
// processes, one CPU, files up to 1 GiB, no network.
var DefaultConfinement = Confinement{FirstUID: 900000, UIDCount: 100000, MemoryBytes: 1 << 30, Pids: 256, CPUs: 1, FileBytes: 1 << 30}

func (c Confinement) withDefaults() Confinement {
	d := DefaultConfinement
	if c.FirstUID <= 0 {
		c.FirstUID = d.FirstUID
	}
	if c.UIDCount <= 0 {
		c.UIDCount = d.UIDCount
	}
	if c.MemoryBytes <= 0 {
		c.MemoryBytes = d.MemoryBytes
	}
	if c.Pids <= 0 {
		c.Pids = d.Pids
	}
	if c.CPUs <= 0 {
		c.CPUs = d.CPUs
	}
	if c.FileBytes <= 0 {
		c.FileBytes = d.FileBytes
	}
	return c
}

// LocalOption configures a LocalAgent.
type LocalOption func(*LocalAgent)

// WithConfinement sets what host kernels may use.
func WithConfinement(c Confinement) LocalOption {
	return func(l *LocalAgent) { l.limits = c.withDefaults() }
}

// NewLocalAgent keeps host kernels under root and talks to them through the
// sandbox-agent binary bin.
func NewLocalAgent(bin, root string, opts ...LocalOption) (*LocalAgent, error) {
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
	l := &LocalAgent{bin: bin, root: abs, socket: sock, limits: DefaultConfinement}
	for _, o := range opts {
		o(l)
	}
	l.uids = newUIDTable(filepath.Join(abs, "uids.json"), l.limits.FirstUID, l.limits.UIDCount)
	return l, nil
}

// Jail returns the confinement of owner's kernels: its uid and the limits.
// Where no jail can be made (sandboxd is not root) it refuses: a host
// kernel never runs unconfined.
func (l *LocalAgent) Jail(owner string) (*jail.Spec, error) {
	if err := jail.Check(); err != nil {
		return nil, errdefs.FailedPrecondition("%v; eval runs only in a sandbox here: create one for this conversation", err)
	}
	uid, err := l.uids.get(owner)
	if err != nil {
		return nil, err
	}
	c := l.limits
	return &jail.Spec{UID: uid, GID: uid, ReadOnly: append([]string(nil), c.ReadOnly...), Network: c.Network,
		MemoryBytes: c.MemoryBytes, Pids: c.Pids, CPUs: c.CPUs, FileBytes: c.FileBytes}, nil
}

// Root is the host folder of kernel programs and working folders.
func (l *LocalAgent) Root() string { return l.root }

// Release removes owner's scratch and gives its uid back; its kernels are
// gone (the caller killed them), and so is the state they held.
func (l *LocalAgent) Release(owner string) error {
	if err := os.RemoveAll(l.Scratch(owner)); err != nil {
		return fmt.Errorf("cannot remove the host kernels' scratch of a conversation: %w", err)
	}
	return l.uids.release(owner)
}

// Scratch is the host folder owner's kernels may write (and work in).
func (l *LocalAgent) Scratch(owner string) string { return filepath.Join(l.root, "work", owner) }

// Started reports whether the host agent daemon was ever started here (its
// socket exists).
func (l *LocalAgent) Started() bool {
	_, err := os.Stat(l.socket)
	return err == nil
}

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
