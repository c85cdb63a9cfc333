package daemon_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// kernelLabels are the labels of the kernel-like spawned process of these
// tests, as the eval tool labels its kernels.
var kernelLabels = map[string]string{"sandboxd.kernel": "python", "sandboxd.kernel.owner": "c0ffee"}

// wake starts a daemon on the state dir a hibernated one left, loads its
// record as the agent does at start, and connects to it.
func wake(t *testing.T, dir string) (*daemon.Server, *agent.Client) {
	t.Helper()
	srv := daemon.New(daemon.WithStateDir(dir))
	t.Cleanup(func() { srv.Close() })
	if err := srv.RestoreHibernation(); err != nil {
		t.Fatalf("loading the hibernation record: %v", err)
	}
	return srv, connect(t, srv)
}

// findProc returns the listed process id, or fails.
func findProc(t *testing.T, ps []proto.ProcInfo, id string) proto.ProcInfo {
	t.Helper()
	for _, p := range ps {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("process %s is not listed: %+v", id, ps)
	return proto.ProcInfo{}
}

// checkStopped fails unless p is reported stopped by a hibernation, with no
// exit code or signal of its own.
func checkStopped(t *testing.T, p proto.ProcInfo, at time.Time) {
	t.Helper()
	if p.State != proto.ProcStopped || !p.Hibernated || p.ExitCode != nil || p.Signal != "" || p.OOMKilled {
		t.Fatalf("process %s after the wake: %+v; want state stopped, hibernated, no exit code or signal", p.ID, p)
	}
	if !p.ExitedAt.Equal(at) {
		t.Fatalf("process %s ended at %s; want the hibernation's time %s", p.ID, p.ExitedAt, at)
	}
}

// A hibernation records the processes that run; the daemon started on the
// same state dir reports each as stopped by it, once: a long-lived process
// with its output and id, a labelled spawned process (a kernel) not
// running, and ids are not given out again. A process that ended before
// the hibernation is not reported, and nothing of the old processes can be
// signalled.
func TestHibernationIsReportedAtTheWake(t *testing.T) {
	dir := t.TempDir()
	srv := daemon.New(daemon.WithStateDir(dir))
	c := connect(t, srv)
	server := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "echo serving; echo warn >&2; exec sleep 600"},
		Labels: map[string]string{"started_by": "api"}, Pty: nil})
	// Both streams are pumped before the hibernation records the output:
	// each has its own pipe, read on its own.
	waitOutput(t, c, server.ID, "serving")
	waitOutput(t, c, server.ID, "warn")
	done := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"echo", "finished"}})
	waitEnded(t, c, done.ID)
	kernel, err := c.Spawn(testCtx(t), &proto.SpawnRequest{Name: "kernel/python", Argv: []string{"sleep", "600"}, Labels: kernelLabels})
	if err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	if err := srv.Hibernate(); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	for _, pid := range []int{server.PID, kernel.PID} {
		waitDead(t, pid, 5*time.Second)
	}
	if _, err := os.Stat(filepath.Join(dir, "hibernation.json")); err != nil {
		t.Fatalf("no record after the hibernation: %v", err)
	}

	_, c2 := wake(t, dir)
	ps, err := c2.ProcList(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 {
		t.Fatalf("after the wake %d processes are listed, want only %s (the one running at the hibernation): %+v", len(ps), server.ID, ps)
	}
	got := findProc(t, ps, server.ID)
	at := got.ExitedAt
	if at.Before(before) || at.After(time.Now()) {
		t.Fatalf("stopped at %s, not during the hibernation (from %s)", at, before)
	}
	checkStopped(t, got, at)
	if got.PID != server.PID || got.Labels["started_by"] != "api" || !got.StartedAt.Equal(server.StartedAt) || strings.Join(got.Argv, " ") != strings.Join(server.Argv, " ") {
		t.Fatalf("the stopped process is not the one started: %+v, started %+v", got, server)
	}
	if p, err := c2.ProcGet(testCtx(t), server.ID, time.Second); err != nil {
		t.Fatal(err)
	} else {
		checkStopped(t, *p, at)
	}
	_, byStream, dropped := readOutput(t, c2, server.ID, 0, 0)
	if string(byStream["stdout"]) != "serving\n" || string(byStream["stderr"]) != "warn\n" || dropped != 0 {
		t.Fatalf("its output after the wake: %q, %d bytes dropped; want what it printed", byStream, dropped)
	}

	ks, err := c2.List(testCtx(t), &proto.ListRequest{Labels: kernelLabels})
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 1 || ks[0].ID != kernel.ID || ks[0].Running || !ks[0].Hibernated || ks[0].Signal != "" ||
		ks[0].Name != "kernel/python" || ks[0].Labels["sandboxd.kernel.owner"] != "c0ffee" || !ks[0].ExitedAt.Equal(at) {
		t.Fatalf("the kernel after the wake: %+v; want %s not running, hibernated, with its name and labels", ks, kernel.ID)
	}
	if info, err := c2.Wait(testCtx(t), &proto.WaitRequest{ID: kernel.ID, Timeout: time.Second}); err != nil || info.Running || !info.Hibernated {
		t.Fatalf("wait on the stopped kernel: %+v, %v", info, err)
	}

	// Nothing of them runs, whatever process has their pids now.
	for name, err := range map[string]error{
		"proc_signal":  c2.ProcSignal(testCtx(t), server.ID, "TERM"),
		"proc_input":   c2.ProcInput(testCtx(t), server.ID, []byte("x"), false),
		"signal group": c2.Signal(testCtx(t), &proto.SignalRequest{ID: kernel.ID, Signal: "KILL", Group: true}),
	} {
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "stopped when the sandbox hibernated") {
			t.Errorf("%s of a stopped process: %v; want failed_precondition saying it was stopped by the hibernation", name, err)
		}
	}
	if _, err := c2.Attach(testCtx(t), kernel.ID, "stdout"); err == nil || !strings.Contains(err.Error(), "stopped when the sandbox hibernated") {
		t.Errorf("attach to the stopped kernel: %v", err)
	}
	if p, err := c2.ProcKill(testCtx(t), server.ID); err != nil || p.State != proto.ProcStopped {
		t.Errorf("kill of the stopped process: %+v, %v; want it answered as it is", p, err)
	}

	// Ids are not given out again; the record was consumed.
	if p := startProc(t, c2, &proto.ProcStartRequest{Argv: []string{"true"}}); p.ID != "p3" {
		t.Fatalf("the first process after the wake is %s, want p3 (p1 and p2 were given out before)", p.ID)
	}
	if _, err := os.Stat(filepath.Join(dir, "hibernation.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the record is still there after the wake: %v", err)
	}
}

// A second restart without a new hibernation does not report the old
// processes again; a new hibernation records those still listed as stopped
// by the first (with their first time) beside those it stops itself.
func TestHibernationRecordIsConsumedOnce(t *testing.T) {
	dir := t.TempDir()
	srv := daemon.New(daemon.WithStateDir(dir))
	c := connect(t, srv)
	first := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "echo one; exec sleep 600"}})
	waitOutput(t, c, first.ID, "one")
	if err := srv.Hibernate(); err != nil {
		t.Fatal(err)
	}

	srv2, c2 := wake(t, dir)
	at1 := findProc(t, must(c2.ProcList(testCtx(t), nil)), first.ID).ExitedAt
	second := startProc(t, c2, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "echo two; exec sleep 600"}})
	waitOutput(t, c2, second.ID, "two")
	if err := srv2.Hibernate(); err != nil {
		t.Fatal(err)
	}

	srv3, c3 := wake(t, dir)
	ps := must(c3.ProcList(testCtx(t), nil))
	if len(ps) != 2 {
		t.Fatalf("after the second wake: %+v; want %s and %s", ps, first.ID, second.ID)
	}
	checkStopped(t, findProc(t, ps, first.ID), at1)
	two := findProc(t, ps, second.ID)
	checkStopped(t, two, two.ExitedAt)
	if !two.ExitedAt.After(at1) {
		t.Fatalf("the second hibernation's time %s is not after the first's %s", two.ExitedAt, at1)
	}
	if out, _, _ := readOutput(t, c3, first.ID, 0, 0); string(out) != "one\n" {
		t.Fatalf("the first process's output after two hibernations: %q", out)
	}

	// A plain stop and start: the record is not read again.
	if err := srv3.Close(); err != nil {
		t.Fatal(err)
	}
	_, c4 := wake(t, dir)
	if ps := must(c4.ProcList(testCtx(t), nil)); len(ps) != 0 {
		t.Fatalf("a restart without a hibernation lists %+v again", ps)
	}
	if p := startProc(t, c4, &proto.ProcStartRequest{Argv: []string{"true"}}); p.ID != "p3" {
		t.Fatalf("first id after the restarts %s, want p3", p.ID)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A record the agent cannot read is reported, removed, and lists nothing;
// the daemon works on.
func TestHibernationRecordDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hibernation.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"at":"2026-01-01T00:00:00Z"}`+"\n"+`{"proc":{"id":"p1"`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := daemon.New(daemon.WithStateDir(dir))
	defer srv.Close()
	err := srv.RestoreHibernation()
	if err == nil || !strings.Contains(err.Error(), "ends before its end line") {
		t.Fatalf("restoring a cut record: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the damaged record is still there: %v", err)
	}
	c := connect(t, srv)
	if ps := must(c.ProcList(testCtx(t), nil)); len(ps) != 0 {
		t.Fatalf("a damaged record lists %+v", ps)
	}
	startProc(t, c, &proto.ProcStartRequest{Argv: []string{"true"}})
}

// A hibernation that comes before the daemon loaded an earlier record
// (right at the wake) keeps that record rather than write an empty one.
func TestHibernationBeforeLoadingKeepsTheRecord(t *testing.T) {
	dir := t.TempDir()
	srv := daemon.New(daemon.WithStateDir(dir))
	c := connect(t, srv)
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sleep", "600"}})
	if err := srv.Hibernate(); err != nil {
		t.Fatal(err)
	}
	early := daemon.New(daemon.WithStateDir(dir))
	if err := early.Hibernate(); err != nil {
		t.Fatal(err)
	}
	_, c2 := wake(t, dir)
	checkStopped(t, findProc(t, must(c2.ProcList(testCtx(t), nil)), p.ID), findProc(t, must(c2.ProcList(testCtx(t), nil)), p.ID).ExitedAt)
}

// Output past what a hibernation keeps (16 MiB shared by the processes):
// the newest bytes are kept at their offsets and the rest is counted as
// dropped, so a reader from 0 learns how much was lost.
func TestHibernationKeepsTheNewestOutput(t *testing.T) {
	const printed = 20_000_000
	dir := t.TempDir()
	srv := daemon.New(daemon.WithStateDir(dir))
	c := connect(t, srv)
	big := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "head -c 19999995 /dev/zero | tr '\\0' a; echo tail; exec sleep 600"},
		RingBytes: proto.MaxProcRing})
	small := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "echo small; exec sleep 600"}})
	waitOutput(t, c, small.ID, "small")
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := c.ProcGet(testCtx(t), big.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Output == printed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the big process printed %d bytes in 20 s, not %d", p.Output, printed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	began := time.Now()
	if err := srv.Hibernate(); err != nil {
		t.Fatal(err)
	}
	t.Logf("recording %d bytes of output and stopping took %s", 16<<20, time.Since(began))
	began = time.Now()
	_, c2 := wake(t, dir)
	t.Logf("loading them took %s", time.Since(began))
	if out, _, dropped := readOutput(t, c2, small.ID, 0, 0); string(out) != "small\n" || dropped != 0 {
		t.Fatalf("the small process's output: %q, %d dropped; want it whole", out, dropped)
	}
	out, _, dropped := readOutput(t, c2, big.ID, 0, proto.MaxProcRead)
	kept := int64(16<<20) - int64(len("small\n"))
	if int64(len(out)) != kept || dropped != printed-kept || !strings.HasSuffix(string(out), "aaaatail\n") {
		t.Fatalf("the big process's output after the wake: %d bytes kept, %d dropped, ends %q; want the newest %d, %d dropped",
			len(out), dropped, out[max(0, len(out)-10):], kept, printed-kept)
	}
	p := findProc(t, must(c2.ProcList(testCtx(t), nil)), big.ID)
	if p.Output != printed || p.RingStart != printed-kept {
		t.Fatalf("the big process's offsets after the wake: output %d, ring start %d", p.Output, p.RingStart)
	}
}

// A sandbox that slept longer than ended processes are kept still reports
// what its hibernation stopped: their retention counts from the wake.
func TestHibernationLongerThanRetention(t *testing.T) {
	dir := t.TempDir()
	slept := time.Now().Add(-48 * time.Hour).UTC()
	started := slept.Add(-time.Hour)
	record := fmt.Sprintf(`{"version":1,"at":%q}
{"proc":{"id":"p7","pid":4242,"argv":["sleep","600"],"state":"running","started_at":%q,"output":0,"ring_start":0,"ring_bytes":65536}}
{"spawned":{"id":"k1","name":"kernel/python","pid":4343,"argv":["python3"],"labels":{"sandboxd.kernel":"python"},"started_at":%q,"running":true,"exit_code":0}}
{"end":true}
`, slept.Format(time.RFC3339Nano), started.Format(time.RFC3339Nano), started.Format(time.RFC3339Nano))
	if err := os.WriteFile(filepath.Join(dir, "hibernation.json"), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := daemon.New(daemon.WithStateDir(dir), daemon.WithRetention(16, time.Hour))
	defer srv.Close()
	if err := srv.RestoreHibernation(); err != nil {
		t.Fatal(err)
	}
	c := connect(t, srv)
	checkStopped(t, findProc(t, must(c.ProcList(testCtx(t), nil)), "p7"), slept)
	if ks := must(c.List(testCtx(t), &proto.ListRequest{Labels: map[string]string{"sandboxd.kernel": "python"}})); len(ks) != 1 || !ks[0].Hibernated || ks[0].Running {
		t.Fatalf("the kernel stopped two days ago: %+v", ks)
	}
	if p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"true"}}); p.ID != "p8" {
		t.Fatalf("the first id after a record with p7 is %s, want p8", p.ID)
	}
}
