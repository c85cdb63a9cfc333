package containerd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// TestGVisorScript: the script the shim runs passes runsc --network=none
// --overlay2=none first and every argument unchanged after it, whatever the path of runsc
// holds; it is executable. A fake runsc (printing its arguments) stands in
// for the real one, which the tests below use.
func TestGVisorScript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "odd dir's")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "runsc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &Backend{dataDir: t.TempDir(), runsc: fake, log: slog.New(slog.DiscardHandler)}
	b.setupGVisor(context.Background())
	if b.gvisorErr != nil {
		t.Fatalf("setup with a runsc that runs: %v", b.gvisorErr)
	}
	if got := b.Runtimes(); !slices.Equal(got, []string{sandbox.RuntimeRunc, sandbox.RuntimeGVisor}) {
		t.Fatalf("Runtimes = %v, want runc and gvisor", got)
	}
	st, err := os.Stat(b.runscScript())
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("the script %s: %v, %v; want mode 0755", b.runscScript(), st, err)
	}
	out, err := exec.Command(b.runscScript(), "create", "--bundle", "a b", "").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "[--network=none]\n[--overlay2=none]\n[create]\n[--bundle]\n[a b]\n[]\n"; string(out) != want {
		t.Fatalf("runsc was run with\n%s\nwant\n%s", out, want)
	}
	if _, err := b.withRuntime(sandbox.Spec{Runtime: sandbox.RuntimeGVisor}); err != nil {
		t.Fatalf("the gVisor runtime option: %v", err)
	}
}

// TestGVisorRefusals: without a runsc that runs the backend serves runc
// alone and says what the operator must do; runc is never refused.
func TestGVisorRefusals(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "runsc")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'cannot run here' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ runsc, want string }{
		{filepath.Join(t.TempDir(), "no-runsc"), "apt-get install runsc"},
		{broken, "cannot run here"},
	} {
		b := &Backend{dataDir: t.TempDir(), runsc: c.runsc, log: slog.New(slog.DiscardHandler)}
		b.setupGVisor(context.Background())
		if got := b.Runtimes(); !slices.Equal(got, []string{sandbox.RuntimeRunc}) {
			t.Errorf("%s: Runtimes = %v, want runc alone", c.runsc, got)
		}
		err := b.RefuseRuntime(sandbox.RuntimeGVisor)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: gVisor refused with %v; want failed_precondition saying %q", c.runsc, err, c.want)
		}
		if _, werr := b.withRuntime(sandbox.Spec{Runtime: sandbox.RuntimeGVisor}); werr == nil || werr.Error() != err.Error() {
			t.Errorf("%s: a gVisor create = %v, want %v", c.runsc, werr, err)
		}
		if err := b.RefuseRuntime(sandbox.RuntimeRunc); err != nil {
			t.Errorf("%s: runc refused: %v", c.runsc, err)
		}
	}
}

// needGVisor skips unless b can run gVisor sandboxes (runsc installed).
func needGVisor(t *testing.T, b *Backend) {
	t.Helper()
	if !slices.Contains(b.Runtimes(), sandbox.RuntimeGVisor) {
		t.Skipf("gVisor cannot run here: %v", b.CheckGVisor(ctx(t)))
	}
}

// TestGVisorCreateRefusedWithoutRunsc: through the Manager, as the API
// asks, a gVisor create on a backend without runsc is a failed
// precondition naming what to install, and leaves no container.
func TestGVisorCreateRefusedWithoutRunsc(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t, WithRunsc(filepath.Join(t.TempDir(), "runsc")))
	m, tenant := startManager(t, b)
	_, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "gv", Image: testImage, Runtime: sandbox.RuntimeGVisor})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "apt-get install runsc") {
		t.Fatalf("a gVisor create without runsc = %v; want failed_precondition naming what to install", err)
	}
	if n, _ := b.cli.Containers(b.nsCtx(ctx(t)), `labels."`+sandbox.LabelTenant+`"==`+tenant); len(n) != 0 {
		t.Errorf("a refused create left %d containers", len(n))
	}
}

// TestGVisorSandbox: on one backend a gVisor sandbox runs gVisor's kernel
// (dmesg, a kernel release not the host's) and a runc one the host's; the
// gVisor one answers through the agent's pipe, pauses and resumes,
// hibernates and wakes with its files, forks into gVisor copies, and
// leaves no process behind when deleted.
func TestGVisorSandbox(t *testing.T) {
	needContainerd(t)
	b := newTestBackend(t)
	needGVisor(t, b)
	m, tenant := startManager(t, b)
	gv, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "gv", Image: testImage, Runtime: sandbox.RuntimeGVisor,
		Resources: sandbox.Resources{CPUs: 0.5, MemoryMB: 300, Pids: 500}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := m.Create(ctx(t), sandbox.Spec{Tenant: tenant, Conversation: "rc", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	if got := sandbox.RuntimeOf(gv); got != sandbox.RuntimeGVisor {
		t.Errorf("the gVisor sandbox says runtime %q", got)
	}
	if got := sandbox.RuntimeOf(rc); got != sandbox.RuntimeRunc {
		t.Errorf("the runc sandbox says runtime %q", got)
	}
	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	sh := func(conv, script string) string {
		t.Helper()
		res := execOut(t, m, tenant, conv, "sh", "-c", script)
		if res.ExitCode != 0 {
			t.Fatalf("%s: %s: exit %d, stderr %q", conv, script, res.ExitCode, res.Stderr)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	checkGVisor := func(conv string) {
		t.Helper()
		if got := sh(conv, "dmesg | head -1"); !strings.Contains(got, "gVisor") {
			t.Errorf("%s: dmesg starts %q, want gVisor's kernel", conv, got)
		}
		if got := sh(conv, "uname -r"); got == strings.TrimSpace(string(host)) {
			t.Errorf("%s: uname -r = %s, the host's kernel", conv, got)
		}
	}
	checkGVisor("gv")
	if got := sh("rc", "uname -r"); got != strings.TrimSpace(string(host)) {
		t.Errorf("the runc sandbox's uname -r = %s, want the host's %s", got, host)
	}
	if len(procsOf(t, rc.ID, "runsc")) != 0 {
		t.Errorf("runsc runs for the runc sandbox")
	}
	if len(procsOf(t, gv.ID, "runsc")) == 0 {
		t.Fatalf("no runsc process for the gVisor sandbox; the test looks in the wrong place")
	}
	// The limits hold on gVisor's host processes, where the operator reads
	// them: inside, gVisor shows its own kernel's view. The pids limit has
	// room for gVisor's own threads on top.
	pidsMax := strconv.Itoa(500 + docker.GVisorPidsAllowance)
	for file, want := range map[string]string{
		"memory/memory.limit_in_bytes": "314572800", "memory.max": "314572800",
		"cpu/cpu.cfs_quota_us": "50000", "cpu.max": "50000 100000",
		"pids/pids.max": pidsMax, "pids.max": pidsMax,
	} {
		if got, ok := hostCgroup(t, b, gv.ID, file); ok && got != want {
			t.Errorf("the gVisor sandbox's host cgroup %s = %s, want %s", file, got, want)
		}
	}
	if got := sh("gv", "grep MemTotal /proc/meminfo"); !strings.Contains(got, " 307200 kB") {
		t.Errorf("inside the gVisor sandbox %q, want the 300 MiB limit", got)
	}
	sh("gv", "echo root > /root/own-file && echo ws > /workspace/ws-file")

	// Pause: runsc freezes the sandbox; resume: the agent answers again.
	if info, err := m.Pause(ctx(t), tenant, gv.ID); err != nil || info.State != sandbox.StatePaused {
		t.Fatalf("Pause = %+v, %v", info.State, err)
	}
	if st := taskStatus(t, b, gv.ID); st != "paused" {
		t.Fatalf("containerd says the paused gVisor task is %s", st)
	}
	if info, err := m.Resume(ctx(t), tenant, gv.ID); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("Resume after Pause = %+v, %v", info.State, err)
	}
	if got := sh("gv", "cat /root/own-file /workspace/ws-file"); got != "root\nws" {
		t.Fatalf("after the pause the files read %q", got)
	}

	// Hibernate stops the task (no runsc process is left); resume starts
	// gVisor again on the same files.
	if info, err := m.Hibernate(ctx(t), tenant, gv.ID); err != nil || info.State != sandbox.StateHibernated {
		t.Fatalf("Hibernate = %+v, %v", info.State, err)
	}
	if left := waitNoProcs(t, gv.ID); len(left) != 0 {
		t.Fatalf("processes of the hibernated gVisor sandbox:\n%s", strings.Join(left, "\n"))
	}
	if info, err := m.Resume(ctx(t), tenant, gv.ID); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("Resume after Hibernate = %+v, %v", info.State, err)
	}
	checkGVisor("gv")
	if got := sh("gv", "cat /root/own-file /workspace/ws-file"); got != "root\nws" {
		t.Fatalf("after the hibernation the files read %q", got)
	}

	// A fork's copy runs under gVisor with the source's files.
	_, made, failed, err := m.Fork(ctx(t), tenant, gv.ID, []string{"gv-copy"})
	if err != nil || len(failed) != 0 || len(made) != 1 {
		t.Fatalf("Fork = %v, %v, %v", made, failed, err)
	}
	if got := sandbox.RuntimeOf(made[0]); got != sandbox.RuntimeGVisor {
		t.Errorf("the fork's copy has runtime %q", got)
	}
	checkGVisor("gv-copy")
	if got := sh("gv-copy", "cat /root/own-file /workspace/ws-file"); got != "root\nws" {
		t.Fatalf("the fork's copy reads %q", got)
	}

	// Delete leaves no process of the sandbox: no runsc, no shim.
	for _, info := range []sandbox.Info{gv, made[0]} {
		if err := m.Delete(ctx(t), tenant, info.ID); err != nil {
			t.Fatal(err)
		}
		if left := waitNoProcs(t, info.ID); len(left) != 0 {
			t.Errorf("processes of the deleted gVisor sandbox %s:\n%s", info.ID, strings.Join(left, "\n"))
		}
	}
	// The runc sandbox went on running through all of it.
	if got := sh("rc", "echo alive"); got != "alive" {
		t.Errorf("the runc sandbox answers %q", got)
	}
}

// TestGVisorSuite runs the backend suite with every sandbox under gVisor.
func TestGVisorSuite(t *testing.T) {
	needContainerd(t)
	needGVisor(t, newTestBackend(t))
	var b *Backend
	dataDir := t.TempDir()
	sandboxtest.Run(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		nb := newTestBackend(t, WithDeployment(d), WithDataDir(dataDir))
		if b == nil {
			b = nb
		}
		return nb
	},
		sandboxtest.WithImage(testImage),
		sandboxtest.WithRuntime(sandbox.RuntimeGVisor),
		sandboxtest.WithIsolation(),
		sandboxtest.WithStopper(func(ctx context.Context, id string) error { return b.Stop(ctx, id) }),
		sandboxtest.WithPauser(
			func(ctx context.Context, id string) error { return taskOf(ctx, b, id, (containerd.Task).Pause) },
			func(ctx context.Context, id string) error { return taskOf(ctx, b, id, (containerd.Task).Resume) }),
	)
}

// TestGVisorLifecycle runs the lifecycle cases (pause, hibernate, wake,
// each twice) with gVisor sandboxes.
func TestGVisorLifecycle(t *testing.T) {
	needContainerd(t)
	needGVisor(t, newTestBackend(t))
	dataDir := t.TempDir()
	sandboxtest.RunLifecycle(t, func(t *testing.T, d sandbox.Deployment) sandbox.Backend {
		return newTestBackend(t, WithDeployment(d), WithDataDir(dataDir))
	}, sandboxtest.WithImage(testImage), sandboxtest.WithRuntime(sandbox.RuntimeGVisor))
}

// procsOf lists the host's processes whose command line names sandbox id's
// container and contains what (as `pgrep -af` shows them).
func procsOf(t *testing.T, id, what string) []string {
	t.Helper()
	out, err := exec.Command("pgrep", "-af", NamePrefix+id).Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: none
		t.Fatalf("pgrep: %v", err)
	}
	var found []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && strings.Contains(l, what) {
			found = append(found, l)
		}
	}
	return found
}

// waitNoProcs waits (bounded) for the processes of sandbox id's container
// to be gone once containerd says its task is, and returns those left.
func waitNoProcs(t *testing.T, id string) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := procsOf(t, id, "")
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// taskStatus is what containerd says of sandbox id's task.
func taskStatus(t *testing.T, b *Backend, id string) string {
	t.Helper()
	c, err := b.cli.LoadContainer(b.nsCtx(ctx(t)), NamePrefix+id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(b.nsCtx(ctx(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := task.Status(b.nsCtx(ctx(t)))
	if err != nil {
		t.Fatal(err)
	}
	return string(st.Status)
}

// hostCgroup reads file of sandbox id's cgroup on the host (cgroup v1 files
// name their controller's hierarchy first); ok is false when this host's
// cgroup version has no such file.
func hostCgroup(t *testing.T, b *Backend, id, file string) (string, bool) {
	t.Helper()
	c, err := b.cli.LoadContainer(b.nsCtx(ctx(t)), NamePrefix+id)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec(b.nsCtx(ctx(t)))
	if err != nil {
		t.Fatal(err)
	}
	_, v2 := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	if (v2 == nil) == strings.Contains(file, "/") {
		return "", false
	}
	path := filepath.Join("/sys/fs/cgroup", spec.Linux.CgroupsPath, file)
	if dir, name, ok := strings.Cut(file, "/"); ok {
		path = filepath.Join("/sys/fs/cgroup", dir, spec.Linux.CgroupsPath, name)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the sandbox's host cgroup: %v", err)
	}
	return strings.TrimSpace(string(data)), true
}
