package bench

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// fakeExec is an engine that responds to one exec with a canned multiplexed
// stream and inspect result.
type fakeExec struct {
	stream    []byte
	inspect   container.ExecInspect
	createErr error
	gotCmd    []string
	closed    bool
}

func (f *fakeExec) ContainerExecCreate(_ context.Context, _ string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	f.gotCmd = o.Cmd
	return container.ExecCreateResponse{ID: "exec1"}, f.createErr
}

func (f *fakeExec) ContainerExecAttach(context.Context, string, container.ExecAttachOptions) (HijackedConn, error) {
	return hijacked{bytes.NewReader(f.stream), func() { f.closed = true }}, nil
}

func (f *fakeExec) ContainerExecInspect(context.Context, string) (container.ExecInspect, error) {
	return f.inspect, nil
}

func muxed(stdout, stderr []byte) []byte {
	var b bytes.Buffer
	_, _ = stdcopy.NewStdWriter(&b, stdcopy.Stdout).Write(stdout)
	if stderr != nil {
		_, _ = stdcopy.NewStdWriter(&b, stdcopy.Stderr).Write(stderr)
	}
	return b.Bytes()
}

func TestExecDemultiplexesAndReportsExitCode(t *testing.T) {
	content := Content(4096)
	f := &fakeExec{stream: muxed(content, []byte("warn\n")), inspect: container.ExecInspect{ExitCode: 3}}
	out, errb, code, err := Exec(context.Background(), f, "c1", "cat", "/workspace/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, content) || string(errb) != "warn\n" || code != 3 {
		t.Errorf("got %d stdout bytes, stderr %q, exit %d", len(out), errb, code)
	}
	if len(f.gotCmd) != 2 || f.gotCmd[0] != "cat" || !f.closed {
		t.Errorf("cmd %v, attach closed %v", f.gotCmd, f.closed)
	}
}

func TestExecFailures(t *testing.T) {
	boom := errors.New("engine gone")
	if _, _, _, err := Exec(context.Background(), &fakeExec{createErr: boom}, "c1", "cat"); !errors.Is(err, boom) {
		t.Errorf("create error: %v", err)
	}
	still := &fakeExec{stream: muxed([]byte("x"), nil), inspect: container.ExecInspect{Running: true}}
	if _, _, _, err := Exec(context.Background(), still, "c1", "cat"); err == nil {
		t.Error("an exec still running after its output ended was accepted")
	}
	huge := &fakeExec{stream: muxed(make([]byte, execCap+1), nil)}
	if _, _, _, err := Exec(context.Background(), huge, "c1", "cat"); err == nil {
		t.Error("output over the cap was accepted")
	}
}

func TestMemoryInUse(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    container.MemoryStats
		want int64
	}{
		{"cgroup v2", container.MemoryStats{Usage: 10 << 20, Stats: map[string]uint64{"inactive_file": 4 << 20}}, 6 << 20},
		{"cgroup v1", container.MemoryStats{Usage: 10 << 20, Stats: map[string]uint64{"total_inactive_file": 1 << 20}}, 9 << 20},
		{"no cache figure", container.MemoryStats{Usage: 3 << 20}, 3 << 20},
		{"cache above usage", container.MemoryStats{Usage: 1, Stats: map[string]uint64{"inactive_file": 2}}, 0},
	} {
		if got := MemoryInUse(tc.m); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
