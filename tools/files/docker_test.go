package files_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
)

var agentBin string

func TestMain(m *testing.M) { sandboxtest.Main(m, "SANDBOXD_TEST_DOCKER", &agentBin, nil) }

// dockerBox is a real Docker sandbox with the file tools in a real registry.
type dockerBox struct {
	t   *testing.T
	cli *client.Client
	id  string // the sandbox's
	reg *tools.Registry
	env *tools.Env
}

func newDockerBox(t *testing.T, opts ...files.Option) *dockerBox {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run the file tools in a Docker sandbox")
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	image := sandboxtest.Image("sandboxd-base:bookworm")
	b, err := docker.New(docker.WithClient(cli), docker.WithAgentBinary(agentBin), docker.WithDefaultImage(image))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	mgr, tenant, info := sandboxtest.Open(t, b, "files", image)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ac, info, err := mgr.Agent(ctx, tenant, "c1")
	if err != nil {
		t.Fatal(err)
	}
	conn := &tools.SandboxConn{ID: info.ID, Backend: "docker", Workspace: info.Workspace, Agent: ac}
	bx := &dockerBox{t: t, cli: cli, id: info.ID, reg: tools.NewRegistry()}
	for _, tool := range files.Tools(opts...) {
		bx.reg.Register(tool)
	}
	bx.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: tenant, Conversation: "c1", Surface: tools.SurfaceDefault, Workdir: info.Workspace},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
	}
	return bx
}

type callResult struct {
	name, text string
	isErr      bool
}

// start runs a call in the background; its result arrives on the channel.
func (bx *dockerBox) start(name string, args any) <-chan callResult {
	raw, _ := json.Marshal(args)
	out := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := bx.reg.Call(ctx, bx.env, name, raw)
		if err != nil {
			out <- callResult{name, "Go error: " + err.Error(), true}
			return
		}
		out <- callResult{name, res.Text(), res.IsError}
	}()
	return out
}

// result waits (bounded) for a started call.
func (bx *dockerBox) result(ch <-chan callResult) callResult {
	bx.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(90 * time.Second):
		bx.t.Fatal("a call did not answer within 90s")
		return callResult{}
	}
}

// A FIFO in a real sandbox: read, edit and apply_patch of it return an
// error message naming it and its type, and a write issued with them (queued
// behind the patch, which takes the whole conversation's turn, and so behind
// the edit before it) is made.
func TestFIFOInSandboxAnswersAndDoesNotHoldTheQueue(t *testing.T) {
	bx := newDockerBox(t)
	if r := bx.result(bx.start("shell", map[string]any{"command": "mkfifo pipe"})); r.isErr {
		t.Fatalf("mkfifo: %s", r.text)
	}
	read := bx.start("read", map[string]any{"path": "pipe"})
	edit := bx.start("edit", map[string]any{"path": "pipe", "old": "a", "new": "b"})
	patch := bx.start("apply_patch", map[string]any{"patch": "--- a/pipe\n+++ b/pipe\n@@ -1 +1 @@\n-a\n+b\n"})
	write := bx.start("write", map[string]any{"path": "after.txt", "content": "written\n"})
	for _, ch := range []<-chan callResult{read, edit, patch} {
		r := bx.result(ch)
		if !r.isErr || !strings.Contains(r.text, "pipe is a named pipe (FIFO), not a regular file") {
			t.Errorf("%s of a FIFO = (is_error=%v) %q; want a sentence naming it and its type", r.name, r.isErr, r.text)
		}
	}
	if r := bx.result(write); r.isErr || !strings.Contains(r.text, "wrote 8 bytes") {
		t.Errorf("write after the FIFO calls = (is_error=%v) %q", r.isErr, r.text)
	}
	if r := bx.result(bx.start("read", map[string]any{"path": "after.txt"})); r.isErr || !strings.Contains(r.text, "written") {
		t.Errorf("read back = %q", r.text)
	}
}

// A stuck sandbox (its container frozen with docker pause) holds a call
// only until the pipe's stall check or the file timeout: that call ends
// with an error message, and the call queued behind it gets its turn, and
// succeeds once the sandbox runs again.
func TestStuckCallFreesTheQueueAtItsDeadline(t *testing.T) {
	bx := newDockerBox(t, files.WithFileTimeout(3*time.Second))
	if r := bx.result(bx.start("write", map[string]any{"path": "a.txt", "content": "one\n"})); r.isErr {
		t.Fatalf("write: %s", r.text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := docker.NamePrefix + bx.id
	if err := bx.cli.ContainerPause(ctx, name); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			bx.cli.ContainerUnpause(context.Background(), name)
		}
	}()
	// The edit goes first and sticks; the write of the same file (writes
	// of other files do not queue behind it) waits its turn. The write
	// must not go first: its request, sent before the pause was found,
	// still lands once the sandbox runs again, and the edit after it
	// would then rightly refuse a file changed since it read it.
	edit := bx.start("edit", map[string]any{"path": "a.txt", "old": "one", "new": "two"})
	time.Sleep(300 * time.Millisecond)
	write := bx.start("write", map[string]any{"path": "a.txt", "content": "other\n"})
	results := make(chan callResult, 2)
	for _, ch := range []<-chan callResult{edit, write} {
		go func() { results <- bx.result(ch) }()
	}
	first := <-results
	// The pipe's stall check finds the pause (about 2 s) before the file
	// timeout (3 s) unless the machine is slow enough for the timeout to
	// come first: either error message ends the call and frees the queue.
	if !first.isErr || !strings.Contains(first.text, "is paused") && !strings.Contains(first.text, "did not finish within 3s") {
		t.Fatalf("the first call on the frozen sandbox = (is_error=%v) %q; want the paused sandbox's or the file timeout's error message", first.isErr, first.text)
	}
	if err := bx.cli.ContainerUnpause(ctx, name); err != nil {
		t.Fatal(err)
	}
	paused = false
	second := <-results
	if second.isErr {
		t.Fatalf("the %s queued behind the stuck %s failed: %q", second.name, first.name, second.text)
	}
}
