package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sandbox-agent-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sandbox-agent")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build sandbox-agent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// attachProc is one `sandbox-agent attach` child and a client over its pipes.
type attachProc struct {
	cmd    *exec.Cmd
	client *agent.Client
	stderr *bytes.Buffer
}

// pipeRWC joins the child's stdout (read) and stdin (write).
type pipeRWC struct {
	io.ReadCloser
	w io.WriteCloser
}

func (p pipeRWC) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeRWC) Close() error {
	p.w.Close()
	return p.ReadCloser.Close()
}

func startAttach(t *testing.T, sock string) *attachProc {
	t.Helper()
	a, err := tryAttach(t, sock)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tryAttach is startAttach for goroutines other than the test's.
func tryAttach(t *testing.T, sock string) (*attachProc, error) {
	cmd := exec.Command(binary, "attach", "--socket", sock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &attachProc{cmd: cmd, stderr: &stderr}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a.client, err = agent.NewClient(ctx, pipeRWC{stdout, stdin})
	if err != nil {
		return nil, fmt.Errorf("NewClient over attach: %v (stderr: %s)", err, stderr.String())
	}
	return a, nil
}

// ownDaemon makes the test stop the daemon (pid from Hello) at its end and
// checks that it goes away.
func ownDaemon(t *testing.T, c *agent.Client) int {
	t.Helper()
	h, err := c.Hello(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if h.PID == os.Getpid() || h.PID <= 1 {
		t.Fatalf("daemon pid %d", h.PID)
	}
	t.Cleanup(func() { stopPid(t, h.PID) })
	return h.PID
}

func stopPid(t *testing.T, pid int) {
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("daemon %d ignored SIGTERM for 10s", pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	st, err := procStat(pid)
	return err == nil && st.state != "Z"
}

type stat struct {
	state string
	ppid  int
}

func procStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0], ppid: ppid}, nil
}

// waitReaped waits until pid is gone entirely: reaped, not a zombie.
func waitReaped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := procStat(pid); err != nil {
			return
		}
		if time.Now().After(deadline) {
			st, _ := procStat(pid)
			t.Fatalf("orphan %d not reaped (state %s)", pid, st.state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func readLine(t *testing.T, r io.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		ch <- strings.TrimSpace(s)
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no line within 10s")
	}
	return ""
}

func TestProcessSurvivesDroppedAttach(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	a := startAttach(t, sock)
	daemonPid := ownDaemon(t, a.client)
	ctx := ctxT(t)

	p, err := a.client.Spawn(ctx, &proto.SpawnRequest{Name: "survivor", Argv: []string{"sh", "-c", "echo hi; sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	// The pipe drops: kill the attach process.
	a.cmd.Process.Kill()
	a.cmd.Wait()
	select {
	case <-a.client.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client not done after its attach process died")
	}
	if !alive(daemonPid) {
		t.Fatal("the daemon died with the attach process")
	}

	b := startAttach(t, sock)
	if h, err := b.client.Hello(ctx); err != nil || h.PID != daemonPid {
		t.Fatalf("second attach reached pid %v (%v), want the same daemon %d", h, err, daemonPid)
	}
	list, err := b.client.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var found *proto.ProcessInfo
	for i := range list {
		if list[i].ID == p.ID {
			found = &list[i]
		}
	}
	if found == nil || !found.Running || found.Name != "survivor" {
		t.Fatalf("list after reattach = %+v", list)
	}
	out, err := b.client.Attach(ctx, p.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if l := readLine(t, out); l != "hi" {
		t.Fatalf("read %q from the survivor", l)
	}
	if a.stderr.Len() > 0 {
		t.Logf("first attach stderr: %s", a.stderr)
	}

	// Stopping the daemon kills what it owns.
	stopPid(t, daemonPid)
	if alive(p.PID) {
		t.Fatalf("process %d outlived its daemon", p.PID)
	}
}

func TestDaemonReapsOrphans(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	a := startAttach(t, sock)
	daemonPid := ownDaemon(t, a.client)
	// An orphan of a spawned process goes to the daemon.
	sp, err := a.client.Spawn(ctxT(t), &proto.SpawnRequest{Argv: []string{"sh", "-c", "sleep 0.5 >/dev/null 2>&1 & echo $!"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.client.Attach(ctxT(t), sp.ID, "stdout")
	if err != nil {
		t.Fatal(err)
	}
	line := readLine(t, out)
	out.Close()
	orphan, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("stdout %q", line)
	}
	if _, err := a.client.Wait(ctxT(t), &proto.WaitRequest{ID: sp.ID, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if st, err := procStat(orphan); err == nil && st.ppid != daemonPid {
		t.Fatalf("orphan %d was re-parented to %d, not the daemon %d", orphan, st.ppid, daemonPid)
	}
	waitReaped(t, orphan)

	// An orphan of an exec goes to the exec's supervisor, the daemon's
	// child, which reaps it.
	r, err := a.client.Exec(ctxT(t), &proto.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.5 >/dev/null 2>&1 & echo $!"}})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err = strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
	if err != nil {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if st, err := procStat(orphan); err == nil {
		sup, err := procStat(st.ppid)
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.ppid))
		if err != nil || sup.ppid != daemonPid || !strings.Contains(string(argv), "\x00contain\x00") {
			t.Fatalf("orphan %d was re-parented to %d (%q, parent %d), not to its supervisor below the daemon %d", orphan, st.ppid, argv, sup.ppid, daemonPid)
		}
	}
	waitReaped(t, orphan)

	// Tracked processes still get their own exit status.
	p, err := a.client.Spawn(ctxT(t), &proto.SpawnRequest{Argv: []string{"sh", "-c", "exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.client.Wait(ctxT(t), &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second})
	if err != nil || w.Running || w.ExitCode != 7 {
		t.Fatalf("wait = %+v, %v", w, err)
	}
}

func TestConcurrentAttachesStartOneDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	var wg sync.WaitGroup
	pids := make([]int, 3)
	procs := make([]*attachProc, 3)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := tryAttach(t, sock)
			if err != nil {
				t.Error(err)
			}
			procs[i] = a
		}()
	}
	wg.Wait()
	for i, a := range procs {
		if a == nil {
			t.FailNow()
		}
		h, err := a.client.Hello(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		pids[i] = h.PID
	}
	ownDaemon(t, procs[0].client)
	if pids[0] != pids[1] || pids[1] != pids[2] {
		t.Fatalf("daemon pids %v: more than one daemon started", pids)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v", fi.Mode(), err)
	}
	di, _ := os.Stat(filepath.Dir(sock))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v", di.Mode())
	}
}

func TestVersionAndBadUsage(t *testing.T) {
	out, err := exec.Command(binary, "version").Output()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("protocol %d", proto.Version)) {
		t.Fatalf("version: %q, %v", out, err)
	}
	cmd := exec.Command(binary, "frobnicate")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "unknown command") {
		t.Fatalf("unknown command: %v, %q", err, stderr.String())
	}
}

func TestInitRunsCommandAndExitsWithIt(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command(binary, "init", "--socket", sock, "--", "sh", "-c", "echo main; exit 5")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := waitWithin(t, cmd, 20*time.Second, "init did not exit after its command")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
		t.Fatalf("init exited with %v, want status 5", err)
	}
	if strings.TrimSpace(stdout.String()) != "main" {
		t.Fatalf("stdout %q", stdout.String())
	}
}

// waitWithin waits for the started cmd for at most d; past that it kills
// it and fails the test with why. It returns what Wait returned.
func waitWithin(t *testing.T, cmd *exec.Cmd, d time.Duration, why string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatal(why)
		return nil
	}
}

// waitListening waits until something accepts connections on sock.
func waitListening(t *testing.T, sock string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 10s: %v", sock, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInitExitsOnSIGTERM(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command(binary, "init", "--socket", sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitListening(t, sock)
	a := startAttach(t, sock) // connects to init's daemon; starts none
	h, err := a.client.Hello(ctxT(t))
	if err != nil || h.PID != cmd.Process.Pid {
		if err == nil {
			stopPid(t, h.PID)
		}
		t.Fatalf("hello = %+v, %v; want init's pid %d", h, err, cmd.Process.Pid)
	}
	p, err := a.client.Spawn(ctxT(t), &proto.SpawnRequest{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := waitWithin(t, cmd, 20*time.Second, "init ignored SIGTERM"); err != nil {
		t.Fatalf("init exited with %v", err)
	}
	if alive(p.PID) {
		t.Fatalf("process %d outlived init", p.PID)
	}
}

// TestAttachHandsItsPipesToTheDaemon: the daemon serves the session on the
// attach's own stdin and stdout (it holds the same pipes), so no process
// copies the bytes in between; closing our end of the pipe ends the
// session and the attach exits.
func TestAttachHandsItsPipesToTheDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	a := startAttach(t, sock)
	daemonPid := ownDaemon(t, a.client)

	pipesOf := func(pid int) map[string]bool {
		out := map[string]bool{}
		entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, e := range entries {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err == nil && strings.HasPrefix(l, "pipe:") {
				out[l] = true
			}
		}
		return out
	}
	attachStdin, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", a.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	attachStdout, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", a.cmd.Process.Pid))
	held := pipesOf(daemonPid)
	if !held[attachStdin] || !held[attachStdout] {
		t.Fatalf("the daemon (pid %d) does not hold the attach's stdin %s and stdout %s; it holds %v", daemonPid, attachStdin, attachStdout, held)
	}
	if _, err := a.client.Hello(ctxT(t)); err != nil {
		t.Fatalf("hello over the handed-over pipes: %v", err)
	}

	a.client.Close()
	exited := make(chan error, 1)
	go func() { exited <- a.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("attach exited with %v (stderr: %s)", err, a.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not exit within 10s of the session's pipe closing")
	}
	if held := pipesOf(daemonPid); held[attachStdin] {
		t.Fatalf("the daemon still holds the ended session's pipe %s", attachStdin)
	}
}
