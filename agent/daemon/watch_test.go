package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// events reads a watch stream into a channel until it ends.
func events(t *testing.T, st *agent.WatchStream) <-chan proto.WatchEvent {
	ch := make(chan proto.WatchEvent, 256)
	go func() {
		defer close(ch)
		for {
			ev, err := st.Next()
			if err != nil {
				return
			}
			ch <- ev
		}
	}()
	t.Cleanup(func() { st.Close() })
	return ch
}

// collect gathers the changes of the events that arrive within d.
func collect(ch <-chan proto.WatchEvent, d time.Duration) (map[string]proto.ChangeKind, []proto.WatchEvent) {
	got := map[string]proto.ChangeKind{}
	var evs []proto.WatchEvent
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return got, evs
			}
			evs = append(evs, ev)
			for _, c := range ev.Changes {
				got[c.Path] = c.Kind
			}
		case <-timer.C:
			return got, evs
		}
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatchRecursiveCoalescedAndIgnored(t *testing.T) {
	_, c := startPair(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	write(t, filepath.Join(root, ".gitignore"), "build/\n*.log\n")
	write(t, filepath.Join(root, "pkg/old.go"), "package pkg\n")
	write(t, filepath.Join(root, "build/out.go"), "package out\n")
	write(t, filepath.Join(root, ".git/HEAD"), "ref: refs/heads/main\n")
	// A window wider than the default: on a loaded machine five writes in a
	// row can be further apart than 75 ms, and the burst is what is tested.
	st, err := c.Watch(testCtx(t), &proto.WatchRequest{Root: root, Window: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if info := st.Info(); info.Dirs != 2 || info.Limited { // root and pkg: .git and build/ are not watched
		t.Fatalf("watch covers %d directories (limited %v), want 2 (the root and pkg)", info.Dirs, info.Limited)
	}
	ch := events(t, st)

	// A burst on one file is one change; a directory made with files in
	// it reports them; ignored and .git paths are not reported.
	for i := range 5 {
		write(t, filepath.Join(root, "pkg/old.go"), fmt.Sprintf("package pkg // %d\n", i))
	}
	write(t, filepath.Join(root, "new/deep/x.go"), "package deep\n")
	write(t, filepath.Join(root, "build/out.go"), "package out // changed\n")
	write(t, filepath.Join(root, "debug.log"), "noise\n")
	write(t, filepath.Join(root, ".git/HEAD"), "ref: refs/heads/other\n")
	got, evs := collect(ch, time.Second)
	if got[filepath.Join(root, "pkg/old.go")] != proto.Changed {
		t.Errorf("pkg/old.go not reported as changed: %v", got)
	}
	if got[filepath.Join(root, "new/deep/x.go")] != proto.Created {
		t.Errorf("new/deep/x.go, made with its directories, not reported as created: %v", got)
	}
	for _, p := range []string{"build/out.go", "debug.log", ".git/HEAD"} {
		if _, ok := got[filepath.Join(root, p)]; ok {
			t.Errorf("%s is ignored but was reported: %v", p, got)
		}
	}
	n := 0
	for _, ev := range evs {
		for _, c := range ev.Changes {
			if c.Path == filepath.Join(root, "pkg/old.go") {
				n++
			}
		}
	}
	if n != 1 {
		t.Errorf("five quick writes of pkg/old.go were reported %d times, want once (coalesced)", n)
	}

	// The new directory is watched from now on; a deletion is reported.
	write(t, filepath.Join(root, "new/deep/x.go"), "package deep // 2\n")
	if err := os.Remove(filepath.Join(root, "pkg/old.go")); err != nil {
		t.Fatal(err)
	}
	got, _ = collect(ch, 500*time.Millisecond)
	if got[filepath.Join(root, "new/deep/x.go")] != proto.Changed {
		t.Errorf("a change in a directory made after the watch began was not reported: %v", got)
	}
	if got[filepath.Join(root, "pkg/old.go")] != proto.Deleted {
		t.Errorf("a deleted file was not reported as deleted: %v", got)
	}
}

func TestWatchDirectoryCap(t *testing.T) {
	_, c := startPair(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	for i := range 5 {
		write(t, filepath.Join(root, fmt.Sprintf("d%d/f.go", i)), "package d\n")
	}
	st, err := c.Watch(testCtx(t), &proto.WatchRequest{Root: root, MaxDirs: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if info := st.Info(); info.Dirs != 3 || !info.Limited {
		t.Fatalf("with a cap of 3 directories the watch covers %d (limited %v), want 3 and limited", info.Dirs, info.Limited)
	}
}

func TestWatchBurstOverCapIsOneOverflow(t *testing.T) {
	_, c := startPair(t)
	for _, tc := range []struct {
		name string
		gap  time.Duration // between writes
	}{
		{"fast", 0},
		// Spread over several windows, as a git checkout is: the cap
		// counts the whole burst, not one window.
		{"spread", 4 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := filepath.EvalSymlinks(t.TempDir())
			// A quiet window far above the gap between writes: on a loaded
			// machine a 4 ms sleep can take tens of ms, which must not end
			// the burst early.
			st, err := c.Watch(testCtx(t), &proto.WatchRequest{Root: root, MaxBatch: 20, Window: 400 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ch := events(t, st)
			for i := range 200 {
				write(t, filepath.Join(root, fmt.Sprintf("f%03d.go", i)), "package f\n")
				time.Sleep(tc.gap)
			}
			_, evs := collect(ch, 2*maxBurstForTest)
			overflows, listed := 0, 0
			for _, ev := range evs {
				if ev.Overflow {
					overflows++
				}
				listed += len(ev.Changes)
			}
			if overflows != 1 || listed > 20 {
				t.Fatalf("200 files over a burst cap of 20 gave %d overflow events and %d listed changes in %d events, want one overflow and at most 20 listed", overflows, listed, len(evs))
			}
		})
	}
}

// maxBurstForTest is the agent's bound on an overflowing burst.
const maxBurstForTest = 2 * time.Second

func TestWatchFlushComesAfterEarlierChanges(t *testing.T) {
	_, c := startPair(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	st, err := c.Watch(testCtx(t), &proto.WatchRequest{Root: root, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ch := events(t, st)
	write(t, filepath.Join(root, "a.py"), "x = 1\n")
	if err := st.Flush(7); err != nil {
		t.Fatal(err)
	}
	sawChange := false
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-ch:
			for _, c := range ev.Changes {
				sawChange = sawChange || c.Path == filepath.Join(root, "a.py")
			}
			if ev.Flushed == 7 {
				if !sawChange {
					t.Fatal("the flush was answered before the change made ahead of it")
				}
				return
			}
		case <-deadline:
			t.Fatal("the flush was not answered (with an hour's window, only the flush can send the change)")
		}
	}
}

func TestWatchSubscribeSync(t *testing.T) {
	srv, c := startPair(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	var mu sync.Mutex
	seen := map[string]bool{}
	handler := func(ev proto.WatchEvent) {
		time.Sleep(50 * time.Millisecond) // a slow subscriber: Sync must wait for it
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range ev.Changes {
			seen[ch.Path] = true
		}
	}
	sub := c.Subscribe(root, "test", handler)
	if again := c.Subscribe(root, "test", handler); again != sub {
		t.Fatal("a second Subscribe under the same name made a second subscription")
	}
	other := c.Subscribe(root, "other", func(proto.WatchEvent) {})
	ctx := testCtx(t)
	// Sync fails until the watch is open; wait for it.
	waitSync(t, sub)
	p := filepath.Join(root, "m.go")
	write(t, p, "package m\n")
	if err := sub.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ok := seen[p]
	mu.Unlock()
	if !ok {
		t.Fatal("after Sync the subscriber had not handled a change made before it")
	}
	if st := sub.Status(); !st.Active || st.Dirs != 1 || st.Events == 0 {
		t.Fatalf("status %+v, want an active watch of 1 directory with events", st)
	}
	other.Close()
	sub.Close()
	select {
	case <-sub.Done():
	case <-time.After(time.Second):
		t.Fatal("a closed subscription's Done did not close")
	}
	// The session's end ends every subscription on it; a new session
	// (the pipe reconnecting) starts its own watch.
	late := c.Subscribe(root, "late", func(proto.WatchEvent) {})
	c.Close()
	select {
	case <-late.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a subscription outlived its agent session")
	}
	c2 := connect(t, srv)
	again := c2.Subscribe(root, "test", handler)
	waitSync(t, again)
	p2 := filepath.Join(root, "n.go")
	write(t, p2, "package m\n")
	if err := again.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ok = seen[p2]
	mu.Unlock()
	if !ok {
		t.Fatal("a subscription on a new session did not see a change")
	}
}

// waitSync waits until a subscription's watch is established.
func waitSync(t *testing.T, sub *agent.Subscription) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for sub.Sync(testCtx(t)) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the watch did not come up: %+v", sub.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
