package daemon_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// startProc starts argv as a long-lived process and fails the test if it
// cannot.
func startProc(t *testing.T, c *agent.Client, r *proto.ProcStartRequest) *proto.ProcInfo {
	t.Helper()
	p, err := c.ProcStart(testCtx(t), r)
	if err != nil {
		t.Fatalf("start %q: %v", r.Argv, err)
	}
	// A quick one may have ended already.
	if p.PID <= 0 || p.StartedAt.IsZero() || !regexp.MustCompile(`^p\d+$`).MatchString(p.ID) {
		t.Fatalf("started process: %+v", p)
	}
	return p
}

// waitEnded waits up to 15 s for process id to end and returns it.
func waitEnded(t *testing.T, c *agent.Client, id string) *proto.ProcInfo {
	t.Helper()
	p, err := c.ProcGet(testCtx(t), id, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.State == proto.ProcRunning {
		t.Fatalf("process %s still running after 15 s: %+v", id, p)
	}
	return p
}

// readOutput reads id's output from since until the process has ended and
// everything was read; it fails on a gap or a repeat between reads.
func readOutput(t *testing.T, c *agent.Client, id string, since int64, maxBytes int) (all []byte, byStream map[string][]byte, dropped int64) {
	t.Helper()
	byStream = map[string][]byte{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := c.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: id, Since: since, MaxBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		dropped += r.Dropped
		off := since + r.Dropped
		for _, ch := range r.Chunks {
			if ch.Offset != off {
				t.Fatalf("chunk at %d, expected %d (a gap or a repeat)", ch.Offset, off)
			}
			off += int64(len(ch.Data))
			all = append(all, ch.Data...)
			byStream[ch.Stream] = append(byStream[ch.Stream], ch.Data...)
		}
		if off != r.Next {
			t.Fatalf("next %d after chunks ending at %d", r.Next, off)
		}
		since = r.Next
		if r.Process.State != proto.ProcRunning && since == r.Process.Output {
			return all, byStream, dropped
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s still running or unread after 20 s: %+v", id, r.Process)
		}
		if len(r.Chunks) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestProcExitStatusIsTheProcesssOwn(t *testing.T) {
	_, c := startPair(t)
	zero := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "exit 0"}})
	three := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"python3", "-c", "import sys; sys.exit(3)"}})
	killed := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "kill -KILL $$"}})
	termed := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sleep", "60"}})
	if err := c.ProcSignal(testCtx(t), termed.ID, "TERM"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id    string
		state string
		code  int // -1: no code
		sig   string
	}{
		{zero.ID, proto.ProcExited, 0, ""},
		{three.ID, proto.ProcExited, 3, ""},
		{killed.ID, proto.ProcKilled, -1, "KILL"},
		{termed.ID, proto.ProcKilled, -1, "TERM"},
	} {
		p := waitEnded(t, c, tc.id)
		gotCode := -1
		if p.ExitCode != nil {
			gotCode = *p.ExitCode
		}
		if p.State != tc.state || gotCode != tc.code || p.Signal != tc.sig || p.OOMKilled || p.ExitedAt.IsZero() || p.ExitedAt.Before(p.StartedAt) {
			t.Errorf("%s: state %s code %d signal %q oom %v exited %v; want %s, %d, %q", tc.id, p.State, gotCode, p.Signal, p.OOMKilled, p.ExitedAt, tc.state, tc.code, tc.sig)
		}
	}
	if zero.ID != "p1" || three.ID != "p2" || killed.ID != "p3" || termed.ID != "p4" {
		t.Errorf("ids %s %s %s %s; want p1 to p4 in start order", zero.ID, three.ID, killed.ID, termed.ID)
	}
	list, err := c.ProcList(testCtx(t), nil)
	if err != nil || len(list) != 4 || list[0].ID != "p1" || list[3].ID != "p4" || list[3].Argv[0] != "sleep" {
		t.Fatalf("list: %+v, %v", list, err)
	}
}

// A process's output survives the session that started it: a new session
// reads on from the cursor the first one had, with nothing lost or repeated.
func TestProcOutputAcrossReconnect(t *testing.T) {
	srv, c1 := startPair(t)
	script := `
import sys, time
for i in range(30):
    print("out", i, flush=True)
    if i % 5 == 0:
        print("err", i, file=sys.stderr, flush=True)
    time.sleep(0.02)
`
	p := startProc(t, c1, &proto.ProcStartRequest{Argv: []string{"python3", "-c", script}})
	var first []byte
	var cursor int64
	for len(first) < 40 {
		r, err := c1.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: p.ID, Since: cursor, MaxBytes: 16})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range r.Chunks {
			first = append(first, ch.Data...)
		}
		cursor = r.Next
		time.Sleep(10 * time.Millisecond)
	}
	c1.Close()
	<-c1.Done()

	c2 := connect(t, srv)
	rest, byStream, dropped := readOutput(t, c2, p.ID, cursor, 0)
	if dropped != 0 {
		t.Fatalf("dropped %d bytes", dropped)
	}
	var want, wantOut, wantErr strings.Builder
	for i := range 30 {
		fmt.Fprintf(&wantOut, "out %d\n", i)
		if i%5 == 0 {
			fmt.Fprintf(&wantErr, "err %d\n", i)
		}
	}
	want.WriteString(wantOut.String())
	got := string(first) + string(rest)
	// The streams interleave as written; each one alone is in order.
	all, byStream2, _ := readOutput(t, c2, p.ID, 0, 0)
	if string(all) != got {
		t.Fatalf("reading from the cursor on a new session gave\n%q\nthen\n%q\nbut the whole output is\n%q", first, rest, all)
	}
	if string(byStream2["stdout"]) != wantOut.String() || string(byStream2["stderr"]) != wantErr.String() {
		t.Fatalf("stdout %q\nstderr %q", byStream2["stdout"], byStream2["stderr"])
	}
	if len(byStream["stdout"])+len(byStream["stderr"]) != len(rest) {
		t.Fatalf("streams of the rest add up to %d bytes, not %d", len(byStream["stdout"])+len(byStream["stderr"]), len(rest))
	}
	if fin := waitEnded(t, c2, p.ID); fin.ExitCode == nil || *fin.ExitCode != 0 || fin.Output != int64(len(got)) {
		t.Fatalf("final %+v, read %d bytes", fin, len(got))
	}
}

func TestProcRingOverflowCountsDropped(t *testing.T) {
	_, c := startPair(t)
	// 200000 numbered lines, about 1.3 MB, into a 64 KiB ring.
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"seq", "1", "200000"}, RingBytes: 64 << 10})
	fin := waitEnded(t, c, p.ID)
	want := []byte{}
	for i := 1; i <= 200000; i++ {
		want = strconv.AppendInt(want, int64(i), 10)
		want = append(want, '\n')
	}
	if fin.Output != int64(len(want)) || fin.RingBytes != 64<<10 {
		t.Fatalf("final %+v; want output %d", fin, len(want))
	}
	got, _, dropped := readOutput(t, c, p.ID, 0, 0)
	if dropped != fin.RingStart || dropped < int64(len(want))-64<<10 || len(got) > 64<<10 {
		t.Fatalf("dropped %d, ring start %d, kept %d of %d", dropped, fin.RingStart, len(got), len(want))
	}
	if !bytes.Equal(got, want[dropped:]) {
		t.Fatalf("the ring does not hold the last %d bytes written", len(got))
	}
	// A reader inside the kept part misses nothing.
	mid := fin.RingStart + 100
	r, err := c.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: p.ID, Since: mid, MaxBytes: 10})
	if err != nil || r.Dropped != 0 || len(r.Chunks) != 1 || r.Chunks[0].Offset != mid || !bytes.Equal(r.Chunks[0].Data, want[mid:mid+10]) || r.Next != mid+10 {
		t.Fatalf("read at %d: %+v, %v", mid, r, err)
	}
	_, err = c.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: p.ID, Since: fin.Output + 1})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "has written") {
		t.Fatalf("a cursor past the end: %v", err)
	}
}

func TestProcFollowLiveAndExit(t *testing.T) {
	_, c := startPair(t)
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", `for i in 1 2 3 4; do echo line$i; sleep 0.3; done; echo bye >&2; exit 7`}})
	f, err := c.ProcFollow(testCtx(t), p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got strings.Builder
	var cursor int64
	var firstAt time.Time
	var exit *proto.ProcInfo
	for {
		fr, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if fr.Dropped != 0 {
			t.Fatalf("dropped %d", fr.Dropped)
		}
		for _, ch := range fr.Chunks {
			if ch.Offset != cursor {
				t.Fatalf("chunk at %d, expected %d", ch.Offset, cursor)
			}
			cursor += int64(len(ch.Data))
			got.Write(ch.Data)
			if firstAt.IsZero() {
				firstAt = time.Now()
			}
		}
		if fr.Next != cursor {
			t.Fatalf("frame next %d, cursor %d", fr.Next, cursor)
		}
		if fr.Exit != nil {
			exit = fr.Exit
		}
	}
	if got.String() != "line1\nline2\nline3\nline4\nbye\n" {
		t.Fatalf("followed %q", got.String())
	}
	if exit == nil || exit.State != proto.ProcExited || exit.ExitCode == nil || *exit.ExitCode != 7 || exit.Output != cursor {
		t.Fatalf("exit frame %+v", exit)
	}
	// The first line came while the process ran, not at its end.
	if exit.ExitedAt.Sub(firstAt) < 600*time.Millisecond {
		t.Fatalf("first output %s before the exit; it should come as printed", exit.ExitedAt.Sub(firstAt))
	}
	// Following an ended process from a cursor gives the rest and the exit.
	f2, err := c.ProcFollow(testCtx(t), p.ID, 6)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	fr, err := f2.Next()
	if err != nil || len(fr.Chunks) == 0 || fr.Chunks[0].Offset != 6 || !strings.HasPrefix(string(fr.Chunks[0].Data), "line2\n") {
		t.Fatalf("resumed follow: %+v, %v", fr, err)
	}
	for fr.Exit == nil {
		if fr, err = f2.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f2.Next(); err != io.EOF {
		t.Fatalf("after the exit frame: %v, want EOF", err)
	}
}

// A follower that reads nothing while a process floods its output falls
// behind the ring: it is told how many bytes it lost, and loses no others.
func TestProcFollowerBehindTheRingGetsDropped(t *testing.T) {
	_, c := startPair(t)
	const total = 30 << 20
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", fmt.Sprintf("yes | head -c %d", total)}, RingBytes: 128 << 10})
	f, err := c.ProcFollow(testCtx(t), p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waitEnded(t, c, p.ID) // reading nothing meanwhile
	var data, dropped, cursor int64
	for {
		fr, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dropped += fr.Dropped
		cursor += fr.Dropped
		for _, ch := range fr.Chunks {
			if ch.Offset != cursor {
				t.Fatalf("chunk at %d, expected %d", ch.Offset, cursor)
			}
			cursor += int64(len(ch.Data))
			data += int64(len(ch.Data))
		}
	}
	if dropped == 0 || data+dropped != total {
		t.Fatalf("received %d bytes and %d reported dropped; want some dropped and %d in all", data, dropped, total)
	}
}

// A process flooding its output with nobody reading keeps the agent's
// memory bounded: the ring stays at its size, and the heap does not grow
// with the output.
func TestProcFloodKeepsMemoryBounded(t *testing.T) {
	_, c := startPair(t)
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"yes", "flood"}})
	time.Sleep(500 * time.Millisecond)
	base := heapInUse()
	time.Sleep(2 * time.Second)
	info, err := c.ProcGet(testCtx(t), p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	grown := heapInUse() - base
	if info.Output < 64<<20 {
		t.Fatalf("yes wrote only %d bytes in 2.5 s; the test needs a flood", info.Output)
	}
	if held := info.Output - info.RingStart; held > proto.DefaultProcRing || info.RingStart == 0 {
		t.Fatalf("the ring holds %d bytes of %d written (cap %d)", held, info.Output, proto.DefaultProcRing)
	}
	if grown > 16<<20 {
		t.Fatalf("the heap grew by %d MiB while %d MiB were written", grown>>20, info.Output>>20)
	}
	if fin, err := c.ProcKill(testCtx(t), p.ID); err != nil || fin.State != proto.ProcKilled || fin.Signal != "KILL" {
		t.Fatalf("kill: %+v, %v", fin, err)
	}
}

func TestProcPty(t *testing.T) {
	_, c := startPair(t)
	tty := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"tty"}, Pty: &proto.PtySize{Rows: 24, Cols: 80}})
	out, streams, _ := readOutput(t, c, tty.ID, 0, 0)
	if !regexp.MustCompile(`^/dev/pts/\d+\r\n$`).Match(out) || len(streams["pty"]) != len(out) {
		t.Fatalf("tty printed %q (streams %v)", out, streams)
	}
	if fin := waitEnded(t, c, tty.ID); fin.ExitCode == nil || *fin.ExitCode != 0 || fin.Pty == nil {
		t.Fatalf("tty: %+v", fin)
	}

	sh := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh"}, Pty: &proto.PtySize{Rows: 24, Cols: 80}, Env: map[string]string{"PS1": "$ "}})
	var cursor int64
	expect := func(re string) {
		t.Helper()
		var seen []byte
		deadline := time.Now().Add(10 * time.Second)
		for !regexp.MustCompile(re).Match(seen) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the terminal's output %q", re, seen)
			}
			r, err := c.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: sh.ID, Since: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range r.Chunks {
				seen = append(seen, ch.Data...)
			}
			cursor = r.Next
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := c.ProcInput(testCtx(t), sh.ID, []byte("stty size; echo TERM=$TERM\n"), false); err != nil {
		t.Fatal(err)
	}
	expect(`24 80\r\nTERM=xterm-256color\r\n`)
	if err := c.ProcResize(testCtx(t), sh.ID, 40, 100); err != nil {
		t.Fatal(err)
	}
	if err := c.ProcInput(testCtx(t), sh.ID, []byte("stty size\n"), false); err != nil {
		t.Fatal(err)
	}
	expect(`40 100\r\n`)
	if info, err := c.ProcGet(testCtx(t), sh.ID, 0); err != nil || info.Pty == nil || *info.Pty != (proto.PtySize{Rows: 40, Cols: 100}) {
		t.Fatalf("after resize: %+v, %v", info, err)
	}
	// cat on the terminal: the line is echoed as typed, then cat prints it.
	if err := c.ProcInput(testCtx(t), sh.ID, []byte("cat\nhello there\n"), false); err != nil {
		t.Fatal(err)
	}
	expect(`hello there\r\nhello there\r\n`)
	if err := c.ProcInput(testCtx(t), sh.ID, nil, true); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("eof on a terminal: %v", err)
	}
	// Ctrl-D ends cat, a second one the shell.
	if err := c.ProcInput(testCtx(t), sh.ID, []byte("\x04"), false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := c.ProcInput(testCtx(t), sh.ID, []byte("exit 5\n"), false); err != nil {
		t.Fatal(err)
	}
	if fin := waitEnded(t, c, sh.ID); fin.ExitCode == nil || *fin.ExitCode != 5 {
		t.Fatalf("sh: %+v", fin)
	}
	if err := c.ProcResize(testCtx(t), sh.ID, 10, 10); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("resize after the end: %v", err)
	}
}

func TestProcStdinInputAndEOF(t *testing.T) {
	_, c := startPair(t)
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "cat; echo done"}})
	if err := c.ProcInput(testCtx(t), p.ID, []byte("abc\n"), false); err != nil {
		t.Fatal(err)
	}
	if err := c.ProcInput(testCtx(t), p.ID, []byte("def\n"), true); err != nil {
		t.Fatal(err)
	}
	out, _, _ := readOutput(t, c, p.ID, 0, 0)
	if string(out) != "abc\ndef\ndone\n" {
		t.Fatalf("output %q", out)
	}
	if err := c.ProcInput(testCtx(t), p.ID, []byte("x"), false); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("input after the end: %v", err)
	}
	if err := c.ProcResize(testCtx(t), p.ID, 10, 10); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "no terminal") {
		t.Fatalf("resize without a terminal: %v", err)
	}
}

func TestProcLimitRefusesWithTheLimit(t *testing.T) {
	_, c := startPair(t)
	a := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sleep", "60"}, MaxLive: 2})
	b := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sleep", "60"}, MaxLive: 2})
	_, err := c.ProcStart(testCtx(t), &proto.ProcStartRequest{Argv: []string{"sleep", "60"}, MaxLive: 2})
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "limit of 2") || !strings.Contains(err.Error(), a.ID+", "+b.ID) {
		t.Fatalf("third start: %v", err)
	}
	if _, err := c.ProcKill(testCtx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	d := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sleep", "60"}, MaxLive: 2})
	if d.ID != "p3" {
		t.Fatalf("the refused start takes no id, so this one is p3, not %s", d.ID)
	}
	for _, bad := range []*proto.ProcStartRequest{
		{Argv: []string{"sleep", "1"}, RingBytes: proto.MaxProcRing + 1},
		{Argv: []string{"sleep", "1"}, Pty: &proto.PtySize{Rows: 0, Cols: 80}},
		{Argv: nil},
	} {
		if _, err := c.ProcStart(testCtx(t), bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("start %+v: %v", bad, err)
		}
	}
	if _, err := c.ProcGet(testCtx(t), "p99", 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// Killing a process kills its descendants: a grandchild in its group and
// one that made a session of its own.
func TestProcKillTakesDescendants(t *testing.T) {
	_, c := startPair(t)
	script := `sh -c 'sleep 600 & echo $!; wait' &
setsid sh -c 'sleep 600 & echo $!; wait' &
wait`
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", script}})
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the grandchildren did not print their pids: %v", pids)
		}
		r, err := c.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		pids = pids[:0]
		for _, ch := range r.Chunks {
			for _, f := range strings.Fields(string(ch.Data)) {
				if n, err := strconv.Atoi(f); err == nil {
					pids = append(pids, n)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("grandchild %d is not running before the kill", pid)
		}
	}
	fin, err := c.ProcKill(testCtx(t), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fin.State != proto.ProcKilled || fin.Signal != "KILL" {
		t.Fatalf("after kill: %+v", fin)
	}
	for _, pid := range pids {
		waitDead(t, pid, 5*time.Second)
	}
	if err := c.ProcSignal(testCtx(t), p.ID, "TERM"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("signal after the end: %v", err)
	}
}

// Ids are never given out twice, across a daemon's restart too when it has
// a state dir.
func TestProcIDsOutliveTheDaemon(t *testing.T) {
	dir := t.TempDir()
	srv := daemon.New(daemon.WithStateDir(dir))
	c := connect(t, srv)
	for _, want := range []string{"p1", "p2"} {
		if p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"true"}}); p.ID != want {
			t.Fatalf("id %s, want %s", p.ID, want)
		}
	}
	c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_, c2 := startPair(t, daemon.WithStateDir(dir))
	if p := startProc(t, c2, &proto.ProcStartRequest{Argv: []string{"true"}}); p.ID != "p3" {
		t.Fatalf("after a restart the first id is %s, want p3", p.ID)
	}
	if _, err := c2.ProcGet(testCtx(t), "p1", 0); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "forgotten") {
		t.Fatalf("an id of the earlier daemon: %v", err)
	}
}

// The daemon's Close kills the processes it started, with what they started.
func TestProcCloseKillsTrees(t *testing.T) {
	srv := daemon.New()
	c := connect(t, srv)
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", "setsid sleep 600 & echo $!; wait"}})
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		r, err := c.ProcOutput(testCtx(t), &proto.ProcOutputRequest{ID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range r.Chunks {
			child, _ = strconv.Atoi(strings.TrimSpace(string(ch.Data)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("no child pid printed")
	}
	c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	waitDead(t, p.PID, 5*time.Second)
	waitDead(t, child, 5*time.Second)
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// Killing a process takes the processes it started whichever way they
// left its group while their parent lives: background jobs, setsid,
// nohup, many at once.
func TestProcKillTakesEscapers(t *testing.T) {
	_, c := startPair(t)
	m := marker()
	script := fmt.Sprintf(`sleep %[1]s &
setsid sleep %[1]s &
nohup sleep %[1]s >/dev/null 2>&1 &
sh -c 'setsid sleep %[1]s & wait' &
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do setsid sleep %[1]s & done
echo started
wait`, m)
	p := startProc(t, c, &proto.ProcStartRequest{Argv: []string{"sh", "-c", script}})
	deadline := time.Now().Add(10 * time.Second)
	for len(withArg(m)) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 20 sleeps started", len(withArg(m)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.ProcKill(testCtx(t), p.ID); err != nil {
		t.Fatal(err)
	}
	waitNone(t, m, 5*time.Second)
}
