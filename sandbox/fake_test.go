package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/errdefs"
)

// fakeBackend keeps sandboxes in memory and serves each one's agent with a
// real in-process daemon (one per sandbox, so processes outlive pipes). It
// stamps its deployment on what it creates but, like an engine that cannot
// filter by label, lists and inspects every deployment's boxes: the Manager
// must filter on its own.
type fakeBackend struct {
	t      *testing.T
	dep    Deployment
	wsRoot string // when set, workspaces are made under it (see Create)

	mu       sync.Mutex // guards the fields below
	boxes    map[string]Info
	daemons  map[string]*daemon.Server
	down     bool
	next     int
	creates  int
	lists    int
	attaches int
	listGate chan struct{} // when set, List snapshots, then waits for it to close
	inspects int
	// attachHook, when set, runs in AttachAgent (under mu) and may change
	// the box; a non-nil error fails the attach, a true dead hands out a
	// pipe that ends before the hello.
	attachHook func(b *Info) (dead bool, err error)
	// inspectHook, when set, runs in Inspect (under mu) and may change the
	// box before it is returned.
	inspectHook func(b *Info)
	pipes       map[string][]*mutePipe // every pipe handed out, by box
}

func newFake(t *testing.T) *fakeBackend {
	f := &fakeBackend{t: t, dep: Deployment{Name: "fake"}, boxes: map[string]Info{}, daemons: map[string]*daemon.Server{}}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, d := range f.daemons {
			d.Close()
		}
	})
	return f
}

func (f *fakeBackend) Name() string { return "fake" }

func (f *fakeBackend) Deployment() Deployment { return f.dep }

func (f *fakeBackend) unavailable() error {
	if f.down {
		return errdefs.Unavailable("the fake engine is down")
	}
	return nil
}

func (f *fakeBackend) Create(ctx context.Context, spec Spec) (Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unavailable(); err != nil {
		return Info{}, err
	}
	f.next++
	f.creates++
	id := fmt.Sprintf("box%03d", f.next)
	ws := ""
	if f.wsRoot != "" {
		// Under a directory made before the Manager started, so that it is
		// removed after the Manager closed (cleanups run last first).
		ws = filepath.Join(f.wsRoot, id)
		if err := os.Mkdir(ws, 0o755); err != nil {
			return Info{}, err
		}
	} else {
		ws = f.t.TempDir()
	}
	info := Info{
		ID: id, Tenant: spec.Tenant, Conversation: spec.Conversation, Backend: "fake",
		Image: spec.Image, State: StateRunning, CreatedAt: time.Now(), Started: time.Now(), Workspace: ws, Deployment: f.dep.Name,
		Labels: map[string]string{LabelManaged: "true", LabelTenant: spec.Tenant, LabelConversation: spec.Conversation, LabelDeployment: f.dep.Name},
	}
	if spec.Pool != "" {
		info.Labels[LabelPool] = spec.Pool
	}
	maps.Copy(info.Labels, LifecycleLabels(spec))
	maps.Copy(info.Labels, ExpiryLabels(spec))
	maps.Copy(info.Labels, ExtLabelsOf(spec))
	f.boxes[id] = info
	return info, nil
}

func (f *fakeBackend) List(ctx context.Context) ([]Info, error) {
	f.mu.Lock()
	if err := f.unavailable(); err != nil {
		f.mu.Unlock()
		return nil, err
	}
	f.lists++
	out := make([]Info, 0, len(f.boxes))
	for _, b := range f.boxes {
		out = append(out, b)
	}
	gate := f.listGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return out, nil
}

func (f *fakeBackend) Inspect(ctx context.Context, id string) (Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unavailable(); err != nil {
		return Info{}, err
	}
	f.inspects++
	b, ok := f.boxes[id]
	if !ok {
		return Info{}, errdefs.NotFound("no box %s", id)
	}
	if f.inspectHook != nil {
		f.inspectHook(&b)
		f.boxes[id] = b
	}
	return b, nil
}

func (f *fakeBackend) Remove(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unavailable(); err != nil {
		return err
	}
	if _, ok := f.boxes[id]; !ok {
		return errdefs.NotFound("no box %s", id)
	}
	delete(f.boxes, id)
	if d := f.daemons[id]; d != nil {
		d.Close()
		delete(f.daemons, id)
	}
	return nil
}

func (f *fakeBackend) AttachAgent(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.unavailable(); err != nil {
		return nil, err
	}
	b, ok := f.boxes[id]
	if !ok {
		return nil, errdefs.NotFound("no box %s", id)
	}
	f.attaches++
	if f.attachHook != nil {
		dead, err := f.attachHook(&b)
		if _, still := f.boxes[id]; still {
			f.boxes[id] = b
		}
		if err != nil {
			return nil, err
		}
		if dead {
			ours, theirs := net.Pipe()
			theirs.Close()
			return ours, nil
		}
	}
	if b.State == StatePaused {
		return nil, errdefs.FailedPrecondition("box %s is paused", id)
	}
	d := f.daemons[id]
	if d == nil {
		d = daemon.New()
		f.daemons[id] = d
	}
	ours, theirs := net.Pipe()
	go func() { _ = d.ServeConn(context.Background(), theirs) }()
	p := &mutePipe{Conn: ours, peer: theirs, quiet: make(chan struct{}), closed: make(chan struct{})}
	if f.pipes == nil {
		f.pipes = map[string][]*mutePipe{}
	}
	f.pipes[id] = append(f.pipes[id], p)
	return p, nil
}

// silence makes every pipe of box id handed out so far go quiet, as an
// engine may keep an exec's stream open after the process behind it died
// (runsc does when its sandbox dies): nothing more arrives, what is
// written goes nowhere, and nothing ends until the pipe is closed.
func (f *fakeBackend) silence(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pipes[id] {
		p.mute()
	}
}

// cut ends every pipe of box id handed out so far from the engine's side,
// as an engine ends an exec's stream when the process behind it died.
func (f *fakeBackend) cut(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pipes[id] {
		_ = p.peer.Close()
	}
}

// mutePipe is a pipe end that silence can make go quiet.
type mutePipe struct {
	net.Conn
	peer   net.Conn // the agent's end
	muted  sync.Once
	quiet  chan struct{} // closed by mute
	closed chan struct{} // closed by Close
	closer sync.Once
}

func (p *mutePipe) mute() {
	p.muted.Do(func() {
		close(p.quiet)
		_ = p.Conn.SetDeadline(time.Now()) // ends a read in progress
	})
}

func (p *mutePipe) isQuiet() bool {
	select {
	case <-p.quiet:
		return true
	default:
		return false
	}
}

func (p *mutePipe) Read(b []byte) (int, error) {
	if !p.isQuiet() {
		n, err := p.Conn.Read(b)
		if !p.isQuiet() {
			return n, err
		}
	}
	<-p.closed
	return 0, io.EOF
}

func (p *mutePipe) Write(b []byte) (int, error) {
	if p.isQuiet() {
		return len(b), nil
	}
	n, err := p.Conn.Write(b)
	if err != nil && p.isQuiet() {
		return len(b), nil
	}
	return n, err
}

func (p *mutePipe) Close() error {
	p.closer.Do(func() { close(p.closed) })
	return p.Conn.Close()
}

// set changes a box behind the Manager's back.
func (f *fakeBackend) set(id string, change func(*Info)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.boxes[id]
	change(&b)
	f.boxes[id] = b
}

func (f *fakeBackend) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.boxes)
}

func (f *fakeBackend) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeBackend) stats() (creates, lists, attaches int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates, f.lists, f.attaches
}

// addOutside creates a box as another replica of the deployment would.
func (f *fakeBackend) addOutside(tenant, conv string) string {
	return f.addLabelled(tenant, conv, map[string]string{LabelManaged: "true", LabelDeployment: f.dep.Name})
}

// addLabelled creates a box with these labels (another deployment's, or
// one from before deployments).
func (f *fakeBackend) addLabelled(tenant, conv string, labels map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := fmt.Sprintf("out%03d", f.next)
	f.boxes[id] = Info{ID: id, Tenant: tenant, Conversation: conv, Backend: "fake", State: StateRunning, CreatedAt: time.Now(),
		Deployment: labels[LabelDeployment], Labels: labels}
	return id
}

// Unlabelled counts the boxes without a deployment label.
func (f *fakeBackend) Unlabelled(ctx context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.boxes {
		if b.Labels[LabelDeployment] == "" {
			n++
		}
	}
	return n, nil
}

var (
	_ Backend           = (*fakeBackend)(nil)
	_ UnlabelledCounter = (*fakeBackend)(nil)
)

// countingObserver counts pipe events.
type countingObserver struct {
	mu                          sync.Mutex
	opened, closed, reconnected int
}

func (o *countingObserver) PipeOpened(string) { o.mu.Lock(); o.opened++; o.mu.Unlock() }
func (o *countingObserver) PipeClosed(string) { o.mu.Lock(); o.closed++; o.mu.Unlock() }
func (o *countingObserver) AgentReconnected(string) {
	o.mu.Lock()
	o.reconnected++
	o.mu.Unlock()
}

func (o *countingObserver) get() (opened, closed, reconnected int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opened, o.closed, o.reconnected
}

func startManager(t *testing.T, b Backend, opts ...Option) *Manager {
	t.Helper()
	m := NewManager(b, opts...)
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or 5 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
