package files_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxd/sandboxd/agent"
	sb "github.com/sandboxd/sandboxd/sandbox"
	cdbackend "github.com/sandboxd/sandboxd/sandbox/containerd"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/host"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
)

// realShell is the shell tool on a real sandbox of a real backend, with a
// way to count the sandbox's processes from outside it.
type realShell struct {
	t   testing.TB
	reg *tools.Registry
	env *tools.Env
	// count tells the processes in the sandbox as its engine (or /proc)
	// shows them: the agent's own (the daemon, its attach bridges, the
	// supervisors of calls) apart from the rest.
	count func() (agent, others int)
}

func (s *realShell) call(command string, timeoutS int) (string, bool) {
	s.t.Helper()
	args := map[string]any{"command": command}
	if timeoutS > 0 {
		args["timeout_s"] = timeoutS
	}
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.reg.Call(ctx, s.env, "shell", raw)
	if err != nil {
		s.t.Fatalf("shell %q: Go error %v", command, err)
	}
	return res.Text(), res.IsError
}

// baseline is the agent's own processes once no call runs: the fewest seen
// over a second, since the supervisor of the last call exits just after
// its result.
func (s *realShell) baseline() int {
	s.t.Helper()
	s.waitCount(1<<30, 10*time.Second, "the baseline")
	least := 1 << 30
	for range 10 {
		agent, _ := s.count()
		least = min(least, agent)
		time.Sleep(100 * time.Millisecond)
	}
	return least
}

// waitCount waits until the sandbox runs none but the agent's own
// processes, at most agentBase of them.
func (s *realShell) waitCount(agentBase int, d time.Duration, what string) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for {
		agent, others := s.count()
		if others == 0 && agent <= agentBase {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: the sandbox still runs %d processes of the agent's (want %d) and %d others %s later", what, agent, agentBase, others, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// echoOK checks that the next call works, as a user's next command would.
func (s *realShell) echoOK(after string) {
	s.t.Helper()
	if out, isErr := s.call("echo ok", 0); isErr || !strings.Contains(out, "exit status 0\n--- stdout ---\nok") {
		s.t.Fatalf("echo ok after %s: %q", after, out)
	}
}

func newRealShell(t testing.TB, mgr *sb.Manager, spec sb.Spec, count func(info sb.Info, ag *agent.Client) func() (int, int)) *realShell {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := mgr.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := mgr.Delete(dctx, spec.Tenant, info.ID); err != nil {
			t.Errorf("delete the sandbox: %v", err)
		}
	})
	ag, info, err := mgr.Agent(ctx, spec.Tenant, spec.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	s := &realShell{t: t, reg: tools.NewRegistry(), count: count(info, ag)}
	for _, tool := range files.Tools() {
		s.reg.Register(tool)
	}
	conn := &tools.SandboxConn{ID: info.ID, Backend: info.Backend, Workspace: info.Workspace, Agent: ag}
	s.env = &tools.Env{
		Run:        &tools.Run{ID: "r1", Tenant: spec.Tenant, Conversation: spec.Conversation, Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
	}
	return s
}

// dockerShell is a real Docker sandbox with a pids limit of pids.
func dockerShell(t testing.TB, pids int64) *realShell {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run the shell against a real Docker sandbox")
	}
	b, err := docker.New(docker.WithAgentBinary(agentBin), docker.WithDefaultImage(sandboxtest.Image("sandboxd-sandbox:latest")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	mgr := startManager(t, b)
	spec := sb.Spec{Tenant: "shelltest-" + strconv.FormatUint(rand.Uint64()%1e9, 36), Conversation: "procs", Resources: sb.Resources{Pids: pids}}
	return newRealShell(t, mgr, spec, func(info sb.Info, _ *agent.Client) func() (int, int) {
		t.Cleanup(func() {
			if t.Failed() {
				logAgent(t, cli, docker.NamePrefix+info.ID)
			}
		})
		return func() (agent, others int) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			top, err := cli.ContainerTop(ctx, docker.NamePrefix+info.ID, nil)
			if err != nil {
				t.Fatalf("docker top: %v", err)
			}
			cmd := slices.Index(top.Titles, "CMD")
			if cmd < 0 {
				t.Fatalf("docker top has no CMD column: %v", top.Titles)
			}
			for _, p := range top.Processes {
				if strings.HasPrefix(p[cmd], docker.AgentPath+" ") {
					agent++
				} else {
					others++
				}
			}
			return agent, others
		}
	})
}

// logAgent puts the end of the sandbox's agent log in the test's.
func logAgent(t testing.TB, cli *client.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cli.ContainerLogs(ctx, name, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "3000"})
	if err != nil {
		t.Logf("the agent's log: %v", err)
		return
	}
	defer r.Close()
	var out strings.Builder
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(r, 1<<20))
	t.Logf("the agent's log ends:\n%s", out.String())
}

// containerdShell is a real containerd sandbox with a pids limit of pids;
// its processes are its task's, read on this machine.
func containerdShell(t testing.TB, pids int64) *realShell {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_CONTAINERD") != "1" {
		t.Skip("set SANDBOXD_TEST_CONTAINERD=1 to run the shell against a real containerd sandbox")
	}
	image := sandboxtest.Image("sandboxd-sandbox:latest")
	b, err := cdbackend.New(cdbackend.WithAgentBinary(agentBin), cdbackend.WithDataDir(t.TempDir()), cdbackend.WithDefaultImage(image))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if _, err := b.SyncFromDocker(ctx, image); err != nil {
		t.Fatal(err)
	}
	cli, err := containerd.New(cdbackend.DefaultAddress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	mgr := startManager(t, b)
	spec := sb.Spec{Tenant: "shelltest-" + strconv.FormatUint(rand.Uint64()%1e9, 36), Conversation: "procs", Resources: sb.Resources{Pids: pids}}
	return newRealShell(t, mgr, spec, func(info sb.Info, _ *agent.Client) func() (int, int) {
		return func() (agent, others int) {
			ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), b.Namespace()), 30*time.Second)
			defer cancel()
			c, err := cli.LoadContainer(ctx, cdbackend.NamePrefix+info.ID)
			if err != nil {
				t.Fatalf("load the container: %v", err)
			}
			task, err := c.Task(ctx, nil)
			if err != nil {
				t.Fatalf("the container's task: %v", err)
			}
			ps, err := task.Pids(ctx)
			if err != nil {
				t.Fatalf("the task's processes: %v", err)
			}
			for _, p := range ps {
				st, err := os.ReadFile("/proc/" + strconv.Itoa(int(p.Pid)) + "/stat")
				if i := strings.LastIndexByte(string(st), ')'); err != nil || i < 0 || strings.HasPrefix(string(st[i:]), ") Z") {
					continue // gone, or a zombie about to be reaped
				}
				argv, _ := os.ReadFile("/proc/" + strconv.Itoa(int(p.Pid)) + "/cmdline")
				if strings.HasPrefix(string(argv), docker.AgentPath+"\x00") {
					agent++
				} else {
					others++
				}
			}
			return agent, others
		}
	})
}

// hostShell is a real host-backend sandbox: its agent is a local daemon,
// and its processes are the daemon's descendants.
func hostShell(t testing.TB) *realShell {
	t.Helper()
	if agentBin == "" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 (the package's tests then build the agent) to run the shell on a real host-backend sandbox")
	}
	b, err := host.New(t.TempDir(), host.WithAgentBinary(agentBin))
	if err != nil {
		t.Fatal(err)
	}
	mgr := startManager(t, b)
	spec := sb.Spec{Tenant: "shelltest", Conversation: "procs"}
	return newRealShell(t, mgr, spec, func(_ sb.Info, ag *agent.Client) func() (int, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hello, err := ag.Hello(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return func() (int, int) {
			agent, others := descendantsOf(hello.PID, agentBin)
			return agent + 1, others
		}
	})
}

func startManager(t testing.TB, b sb.Backend) *sb.Manager {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mgr := sb.NewManager(b)
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	return mgr
}

// descendantsOf counts the live processes below pid, those running agentBin
// apart.
func descendantsOf(pid int, agentBin string) (agent, others int) {
	children := map[int][]int{}
	isAgent := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		i := strings.LastIndexByte(string(b), ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
		argv, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		isAgent[p] = strings.HasPrefix(string(argv), agentBin+"\x00")
	}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if isAgent[c] {
				agent++
			} else {
				others++
			}
		}
		queue = append(queue, children[p]...)
	}
	return agent, others
}

// escapers starts 20 sleepers that leave the shell every way one can:
// background jobs, setsid, a double-forked daemon, nohup.
const escapers = `sleep 1000 &
setsid sleep 1000 &
(setsid sh -c 'sleep 1000 & exit 0' &)
nohup sleep 1000 >/dev/null 2>&1 &
for i in $(seq 16); do setsid sleep 1000 & done
sleep 1
`

// checkEscapers: a deadline kills every process the call started, and a
// normal exit leaves them running until the deadline, then kills them.
func checkEscapers(t *testing.T, s *realShell) {
	s.echoOK("the start")
	base := s.baseline()

	// The agent ignores SIGHUP and SIGPIPE for itself; a command starts
	// with every standard signal at its default, as a shell expects
	// (`yes | head`). The real-time signals from 32 up are left out: they
	// are libc's own, no Go program can reset them, and an ignored one is
	// inherited from whatever started the test, not from the agent.
	out, _ := s.call("grep ^SigIgn /proc/self/status", 0)
	if ign, ok := sigIgnMask(out); !ok || ign&0x7fffffff != 0 {
		t.Fatalf("a command starts with standard signals ignored: %q", out)
	}

	out, isErr := s.call(escapers+"sleep 1000", 3)
	if !isErr || !strings.HasPrefix(out, "timed out after 3s; the command and every process it started were killed (") {
		t.Fatalf("timeout: %q", out)
	}
	s.waitCount(base, 10*time.Second, "after the timeout")
	s.echoOK("the timeout")

	out, isErr = s.call(escapers+"exit 0", 4)
	if isErr || !strings.Contains(out, "the command left 20 processes running in the background (pids ") {
		t.Fatalf("background jobs: %q", out)
	}
	// The agent's supervisor of the call holds them until the timeout.
	if agent, others := s.count(); others != 20 || agent != base+1 {
		t.Fatalf("%d processes of the agent's and %d others run after the command exited, want %d (with the call's supervisor) and its 20 background ones", agent, others, base+1)
	}
	s.waitCount(base, 15*time.Second, "after the background jobs' timeout")
	s.echoOK("the background jobs")
}

func TestShellDeadlineKillsEscapedProcessesDocker(t *testing.T) {
	checkEscapers(t, dockerShell(t, 256))
}

func TestShellDeadlineKillsEscapedProcessesContainerd(t *testing.T) {
	checkEscapers(t, containerdShell(t, 256))
}

func TestShellDeadlineKillsEscapedProcessesHost(t *testing.T) {
	checkEscapers(t, hostShell(t))
}

func TestShellForkBombDocker(t *testing.T) { checkForkBomb(t, dockerShell(t, 64)) }

func TestShellForkBombContainerd(t *testing.T) { checkForkBomb(t, containerdShell(t, 64)) }

// checkForkBomb: a fork bomb fills the sandbox's 64 pids at once; the
// agent's pid guard kills it, the result says so, and the next call runs.
// It is run a few times, since a bomb that won a race once would not show
// in one run.
func checkForkBomb(t *testing.T, s *realShell) {
	s.echoOK("the start")
	base := s.baseline()
	for i := range 3 {
		what := fmt.Sprintf("fork bomb %d", i+1)
		out, isErr := s.call(`:(){ :|:& };:`, 20)
		// The shell may have exited already or still be retrying its forks.
		if !isErr || !strings.Contains(strings.SplitN(out, "\n---", 2)[0], "\nthe sandbox ran out of processes (") {
			t.Fatalf("%s: %.400q", what, out)
		}
		s.waitCount(base, 30*time.Second, what)
		s.echoOK(what)
	}
	// A bomb whose shell carries on: the guard kills the shell too.
	out, isErr := s.call(`:(){ :|:& };:; sleep 30`, 20)
	if !isErr || !strings.HasPrefix(out, "killed by signal KILL\nthe sandbox ran out of processes (") {
		t.Fatalf("waiting fork bomb: %.400q", out)
	}
	s.waitCount(base, 30*time.Second, "the waiting fork bomb")
	s.echoOK("the waiting fork bomb")
}

// sigIgnMask reads the SigIgn mask out of a shell call's result.
func sigIgnMask(out string) (uint64, bool) {
	_, rest, ok := strings.Cut(out, "SigIgn:\t")
	if !ok {
		return 0, false
	}
	hex, _, _ := strings.Cut(rest, "\n")
	v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
	return v, err == nil
}
