package sandboxtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Option adapts the suite to a backend.
type Option func(*config)

type config struct {
	image string
	count func(ctx context.Context, tenant string) (int, error)
	stop  func(ctx context.Context, id string) error
	// pause and unpause freeze and thaw a sandbox in its engine
	// (WithPauser).
	pause, unpause func(ctx context.Context, id string) error
	// isolated enables the limit and network cases (WithIsolation).
	isolated bool
	// runtime is the runtime of every sandbox the suite creates
	// (WithRuntime).
	runtime string
}

// WithImage is the image of every sandbox the suite creates.
func WithImage(image string) Option { return func(c *config) { c.image = image } }

// WithRuntime makes every sandbox the suite creates with runtime r
// (sandbox.RuntimeGVisor, say), so that one backend's cases run again under
// each runtime it serves; every sandbox checks that it got r.
func WithRuntime(r string) Option { return func(c *config) { c.runtime = r } }

// WithCounter counts the tenant's sandboxes the way an operator would (for
// Docker: containers in any state carrying the tenant label), to prove that
// lookups create nothing. Default: the backend's List.
func WithCounter(count func(ctx context.Context, tenant string) (int, error)) Option {
	return func(c *config) { c.count = count }
}

// WithStopper stops a sandbox behind the Manager's back; without it the
// "stopped outside" case is skipped (the host backend cannot stop one).
func WithStopper(stop func(ctx context.Context, id string) error) Option {
	return func(c *config) { c.stop = stop }
}

// WithPauser freezes and thaws a sandbox as `docker pause` and `docker
// unpause` do; without it the "paused outside" case is skipped (only Docker
// and containerd can pause).
func WithPauser(pause, unpause func(ctx context.Context, id string) error) Option {
	return func(c *config) { c.pause, c.unpause = pause, unpause }
}

// NewBackend returns a backend working for deployment d; every backend it
// returns in one Run must share one engine (and namespace, or data dir).
type NewBackend func(t *testing.T, d sandbox.Deployment) sandbox.Backend

// suite is one Run: a fresh tenant and deployment, so parallel runs on one
// engine never see each other's sandboxes.
type suite struct {
	t          *testing.T
	cfg        config
	newBackend NewBackend
	b          sandbox.Backend
	dep        sandbox.Deployment
	tenant     string
}

// Run runs every case against backends newBackend returns: the suite's own
// and, for the deployment case, others on the same engine. Every sandbox
// the suite creates is removed when the test ends.
func Run(t *testing.T, newBackend NewBackend, opts ...Option) {
	s := &suite{t: t, newBackend: newBackend, tenant: "suite-" + randHex(4)}
	s.dep = sandbox.Deployment{Name: s.tenant}
	s.b = s.backend(t, s.dep)
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.count == nil {
		s.cfg.count = s.listCount
	}

	t.Run("CreateListGet", s.createListGet)
	t.Run("ConflictOnSecondCreate", s.conflict)
	t.Run("RestartFindsSandbox", s.restart)
	t.Run("ExpiryAndLabelsKept", s.expiryAndLabels)
	t.Run("AgentFilesAndExec", s.agentFilesAndExec)
	t.Run("LimitsApplied", s.limitsApplied)
	t.Run("NetworkDenied", s.networkDenied)
	t.Run("ProcessSurvivesPipeAndRestart", s.processSurvives)
	t.Run("LookupCreatesNothing", s.lookupCreatesNothing)
	t.Run("RemovedBehindOurBack", s.removedBehindBack)
	t.Run("StoppedBehindOurBack", s.stoppedBehindBack)
	t.Run("PausedBehindOurBack", s.pausedBehindBack)
	t.Run("PausedRightAfterACall", s.pausedRightAfterCall)
	t.Run("DeploymentsApart", s.deploymentsApart)
	t.Run("Delete", s.delete)
}

// backend returns a backend of deployment d. The suite's sandboxes in it
// are removed when t ends, before any cleanup newBackend registered (which
// may close the backend).
func (s *suite) backend(t *testing.T, d sandbox.Deployment) sandbox.Backend {
	b := s.newBackend(t, d)
	t.Cleanup(func() { s.removeAll(b) })
	if got := b.Deployment(); got.Name != d.Name {
		t.Fatalf("the backend works for deployment %q, want %q", got.Name, d.Name)
	}
	return b
}

func (s *suite) manager(t *testing.T, opts ...sandbox.Option) *sandbox.Manager {
	t.Helper()
	return managerOf(t, s.b, opts...)
}

func managerOf(t *testing.T, b sandbox.Backend, opts ...sandbox.Option) *sandbox.Manager {
	t.Helper()
	m := sandbox.NewManager(b, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func (s *suite) create(t *testing.T, m *sandbox.Manager, conv string) sandbox.Info {
	t.Helper()
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: s.tenant, Conversation: conv, Image: s.cfg.image, Runtime: s.cfg.runtime})
	if err != nil {
		t.Fatalf("Create(%s): %v", conv, err)
	}
	s.checkRuntime(t, info)
	return info
}

// checkRuntime fails t unless info's sandbox has the suite's runtime.
func (s *suite) checkRuntime(t *testing.T, info sandbox.Info) {
	t.Helper()
	want := s.cfg.runtime
	if want == "" {
		want = sandbox.RuntimeRunc
	}
	if got := sandbox.RuntimeOf(info); got != want {
		t.Fatalf("sandbox %s has runtime %q, want %q", info.ID, got, want)
	}
}

func (s *suite) agent(t *testing.T, m *sandbox.Manager, conv string) (*agent.Client, sandbox.Info) {
	t.Helper()
	c, info, err := m.Agent(ctx(t), s.tenant, conv)
	if err != nil {
		t.Fatalf("Agent(%s): %v", conv, err)
	}
	return c, info
}

func (s *suite) createListGet(t *testing.T) {
	m := s.manager(t)
	info := s.create(t, m, "c-list")
	if info.ID == "" || info.Tenant != s.tenant || info.Conversation != "c-list" || info.State != sandbox.StateRunning ||
		info.Backend != s.b.Name() || info.Workspace == "" || info.CreatedAt.IsZero() {
		t.Fatalf("Create returned %+v", info)
	}
	list, err := m.List(ctx(t), s.tenant, "")
	if err != nil || !hasID(list, info.ID) {
		t.Fatalf("List = %+v, %v; want it to contain %s", list, err, info.ID)
	}
	if list, _ := m.List(ctx(t), s.tenant, "c-other"); len(list) != 0 {
		t.Errorf("List of another conversation = %+v, want empty", list)
	}
	got, err := m.Get(ctx(t), s.tenant, info.ID)
	if err != nil || got.ID != info.ID || got.State != sandbox.StateRunning {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := m.Get(ctx(t), s.tenant+"-other", info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get by another tenant = %v, want not_found", err)
	}
}

func (s *suite) conflict(t *testing.T) {
	m := s.manager(t)
	first := s.create(t, m, "c-conflict")
	_, err := m.Create(ctx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-conflict", Image: s.cfg.image, Runtime: s.cfg.runtime})
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), first.ID) {
		t.Fatalf("second Create = %v, want conflict naming %s", err, first.ID)
	}
}

func (s *suite) restart(t *testing.T) {
	m := s.manager(t)
	info := s.create(t, m, "c-restart")
	m.Close()
	m2 := s.manager(t)
	got, err := m2.Lookup(ctx(t), s.tenant, "c-restart")
	if err != nil || got.ID != info.ID {
		t.Fatalf("a new Manager's Lookup = %+v, %v; want %s", got, err, info.ID)
	}
}

func (s *suite) agentFilesAndExec(t *testing.T) {
	m := s.manager(t)
	s.create(t, m, "c-files")
	c, info := s.agent(t, m, "c-files")
	err := c.WriteFiles(ctx(t), &proto.WriteFilesRequest{Root: info.Workspace, Files: []proto.WriteFile{
		{Path: "dir/hello.txt", Data: []byte("hello sandbox\n"), MkdirAll: true},
	}})
	if err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	rf, err := c.ReadFile(ctx(t), &proto.ReadFileRequest{Root: info.Workspace, Path: "dir/hello.txt"})
	if err != nil || string(rf.Data) != "hello sandbox\n" {
		t.Fatalf("ReadFile = %+v, %v", rf, err)
	}
	ex, err := c.Exec(ctx(t), &proto.ExecRequest{Argv: []string{"echo", "hi"}, Timeout: 20 * time.Second})
	if err != nil || ex.ExitCode != 0 || string(ex.Stdout) != "hi\n" {
		t.Fatalf("Exec echo = %+v, %v", ex, err)
	}
	ex, err = c.Exec(ctx(t), &proto.ExecRequest{Argv: []string{"cat", "dir/hello.txt"}, Dir: info.Workspace, Timeout: 20 * time.Second})
	if err != nil || string(ex.Stdout) != "hello sandbox\n" {
		t.Fatalf("Exec cat in the workspace = %+v, %v", ex, err)
	}
	// The pipe is reused, not re-opened per call.
	c2, _ := s.agent(t, m, "c-files")
	if c2 != c {
		t.Error("a second Agent call opened another pipe")
	}
}

func (s *suite) processSurvives(t *testing.T) {
	m := s.manager(t)
	s.create(t, m, "c-survive")
	c, _ := s.agent(t, m, "c-survive")
	p, err := c.Spawn(ctx(t), &proto.SpawnRequest{
		Name:  "echoer",
		Argv:  []string{"sh", "-c", "while read l; do echo got:$l; done"},
		Stdin: true,
	})
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	// Removing the sandbox at the end kills it.
	m.Close() // drops the pipe: the process must keep running
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the pipe")
	}

	m2 := s.manager(t)
	c2, _ := s.agent(t, m2, "c-survive")
	procs, err := c2.List(ctx(t), &proto.ListRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var found *proto.ProcessInfo
	for i := range procs {
		if procs[i].ID == p.ID {
			found = &procs[i]
		}
	}
	if found == nil || !found.Running || found.PID != p.PID {
		t.Fatalf("after a new pipe the agent lists %+v, want %s (pid %d) running", procs, p.ID, p.PID)
	}
	out, err := c2.Attach(ctx(t), p.ID, "stdout")
	if err != nil {
		t.Fatalf("Attach stdout: %v", err)
	}
	defer out.Close()
	in, err := c2.Attach(ctx(t), p.ID, "stdin")
	if err != nil {
		t.Fatalf("Attach stdin: %v", err)
	}
	defer in.Close()
	if _, err := io.WriteString(in, "ping\n"); err != nil {
		t.Fatalf("write to the re-attached stdin: %v", err)
	}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "got:ping\n" {
			t.Fatalf("re-attached stdout said %q, want %q", l, "got:ping\n")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the re-attached process within 10s")
	}
}

func (s *suite) lookupCreatesNothing(t *testing.T) {
	m := s.manager(t)
	before, err := s.cfg.count(ctx(t), s.tenant)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := m.Lookup(ctx(t), s.tenant, "c-nobody"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("Lookup = %v, want not_found", err)
		}
		if _, _, err := m.Agent(ctx(t), s.tenant, "c-nobody"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("Agent = %v, want not_found", err)
		}
	}
	after, err := s.cfg.count(ctx(t), s.tenant)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("lookups changed the number of sandboxes from %d to %d", before, after)
	}
}

func (s *suite) removedBehindBack(t *testing.T) {
	m := s.manager(t)
	info := s.create(t, m, "c-removed")
	c, _ := s.agent(t, m, "c-removed")
	if err := s.b.Remove(ctx(t), info.ID); err != nil {
		t.Fatalf("backend Remove: %v", err)
	}
	waitDone(t, c)
	_, _, err := m.Agent(ctx(t), s.tenant, "c-removed")
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "c-removed") || !strings.Contains(err.Error(), "outside sandboxd") {
		t.Fatalf("Agent on a sandbox removed behind the manager = %v, want not_found explaining it", err)
	}
	if _, err := m.Lookup(ctx(t), s.tenant, "c-removed"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup after the removal = %v, want not_found", err)
	}
}

func (s *suite) stoppedBehindBack(t *testing.T) {
	if s.cfg.stop == nil {
		t.Skip("this backend cannot stop a sandbox without removing it")
	}
	m := s.manager(t)
	info := s.create(t, m, "c-stopped")
	c, _ := s.agent(t, m, "c-stopped")
	if err := s.cfg.stop(ctx(t), info.ID); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The assertion is about a sandbox the engine calls stopped: wait for
	// the engine to say so, then for the pipe to end.
	s.waitState(t, s.b, info.ID, sandbox.StateStopped)
	waitDone(t, c)
	_, _, err := m.Agent(ctx(t), s.tenant, "c-stopped")
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "no longer running") {
		t.Fatalf("Agent on a stopped sandbox = %v, want failed_precondition saying it is no longer running", err)
	}
	if got, err := m.Get(ctx(t), s.tenant, info.ID); err != nil || got.State != sandbox.StateStopped {
		t.Errorf("Get of the stopped sandbox = %+v, %v; want state stopped", got, err)
	}
}

func (s *suite) delete(t *testing.T) {
	m := s.manager(t)
	info := s.create(t, m, "c-delete")
	s.agent(t, m, "c-delete")
	before, _ := s.cfg.count(ctx(t), s.tenant)
	if err := m.Delete(ctx(t), s.tenant, info.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := m.Get(ctx(t), s.tenant, info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want not_found", err)
	}
	if _, err := s.b.Inspect(ctx(t), info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("backend Inspect after Delete = %v, want not_found", err)
	}
	if after, _ := s.cfg.count(ctx(t), s.tenant); after != before-1 {
		t.Errorf("Delete changed the count from %d to %d, want %d", before, after, before-1)
	}
	// The conversation may have a new sandbox now.
	s.create(t, m, "c-delete")
}

func (s *suite) listCount(ctx context.Context, tenant string) (int, error) {
	infos, err := s.b.List(ctx)
	n := 0
	for _, i := range infos {
		if i.Tenant == tenant {
			n++
		}
	}
	return n, err
}

// removeAll removes every sandbox of the suite's tenant in b.
func (s *suite) removeAll(b sandbox.Backend) {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	infos, err := b.List(c)
	if err != nil {
		s.t.Errorf("cleanup: %v", err)
		return
	}
	for _, i := range infos {
		if i.Tenant == s.tenant {
			if err := b.Remove(c, i.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				s.t.Errorf("cleanup of %s: %v", i.ID, err)
			}
		}
	}
}

// waitState waits until the engine reports id in state want.
func (s *suite) waitState(t *testing.T, b sandbox.Backend, id, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := b.Inspect(ctx(t), id)
		if err == nil && info.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %+v, %v after 2 minutes; want state %s", id, info.State, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitDone(t *testing.T, c *agent.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the agent pipe did not notice within 15s")
	}
}

func hasID(infos []sandbox.Info, id string) bool {
	for _, i := range infos {
		if i.ID == id {
			return true
		}
	}
	return false
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
