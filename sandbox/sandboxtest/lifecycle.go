package sandboxtest

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// RunLifecycle runs the lifecycle cases against backends newBackend returns,
// which must be sandbox.Freezers and sandbox.Hibernators: a sandbox paused
// and unpaused again and again keeps its files byte for byte and its
// processes (frozen in between: they print nothing while paused);
// hibernated, it is reported so, and since when, to a new backend on the
// same engine too, and keeps its files, workspace and its own file system
// alike, while its processes are gone after it wakes; each verb done twice
// changes nothing the second time. The cases use the backend alone, as the
// Manager would, with the agent reached through AttachAgent.
func RunLifecycle(t *testing.T, newBackend NewBackend, opts ...Option) {
	s := &suite{t: t, newBackend: newBackend, tenant: "life-" + randHex(4)}
	s.dep = sandbox.Deployment{Name: s.tenant}
	s.b = s.backend(t, s.dep)
	for _, o := range opts {
		o(&s.cfg)
	}
	if _, ok := s.b.(sandbox.Freezer); !ok {
		t.Fatalf("the %s backend cannot pause a sandbox (it is no sandbox.Freezer)", s.b.Name())
	}
	if _, ok := s.b.(sandbox.Hibernator); !ok {
		t.Fatalf("the %s backend cannot hibernate a sandbox (it is no sandbox.Hibernator)", s.b.Name())
	}
	t.Run("PauseHibernateWake", s.lifecycle)
	t.Run("HibernatePaused", s.hibernatePaused)
	t.Run("MissingSandbox", s.lifecycleMissing)
}

const (
	// treeFiles is the size of the tree checked after every transition.
	treeFiles = 300
	// pauseHold is how long each pause lasts: long enough for a counter
	// that was not frozen to print a few lines in it.
	pauseHold = 500 * time.Millisecond
	// pauseCycles is how many times the sandbox is paused and unpaused.
	pauseCycles = 10
	// sinceSlack allows for clocks read a moment apart (the test's and the
	// engine's) when a StateSince is compared with when a verb was called.
	sinceSlack = time.Second
)

// lifeBox is one sandbox under test with the files it must keep.
type lifeBox struct {
	s    *suite
	info sandbox.Info
	fr   sandbox.Freezer
	hb   sandbox.Hibernator
	// tree maps the workspace's files to their checksums.
	tree map[string][sha256.Size]byte
	// rootfsPath is a file outside the workspace, in the sandbox's own
	// file system; rootfsData its contents.
	rootfsPath string
	rootfsData []byte
}

func (s *suite) lifeBox(t *testing.T, conv string) *lifeBox {
	t.Helper()
	info, err := s.b.Create(ctx(t), sandbox.Spec{Tenant: s.tenant, Conversation: conv, Image: s.cfg.image, Runtime: s.cfg.runtime})
	if err != nil {
		t.Fatalf("Create(%s): %v", conv, err)
	}
	s.checkRuntime(t, info)
	lb := &lifeBox{s: s, info: info, fr: s.b.(sandbox.Freezer), hb: s.b.(sandbox.Hibernator)}
	// A failed case must not leave a frozen sandbox to the cleanup.
	t.Cleanup(func() { _ = lb.fr.Unpause(ctx(t), info.ID) })
	return lb
}

// dial opens a new agent pipe to the sandbox; it is closed when t ends.
func (lb *lifeBox) dial(t *testing.T) *agent.Client {
	t.Helper()
	rwc, err := lb.s.b.AttachAgent(ctx(t), lb.info.ID)
	if err != nil {
		t.Fatalf("AttachAgent: %v", err)
	}
	c, err := agent.NewClient(ctx(t), rwc)
	if err != nil {
		rwc.Close()
		t.Fatalf("a new agent pipe does not answer: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		rwc.Close()
	})
	return c
}

// writeFiles writes a tree of treeFiles files of assorted sizes (some
// empty) in the workspace and one file outside it, and remembers their
// checksums.
func (lb *lifeBox) writeFiles(t *testing.T, c *agent.Client) {
	t.Helper()
	lb.tree = make(map[string][sha256.Size]byte, treeFiles)
	files := make([]proto.WriteFile, 0, treeFiles)
	for i := range treeFiles {
		data := make([]byte, (i*677)%9000)
		_, _ = rand.Read(data)
		p := fmt.Sprintf("tree/d%02d/s%d/f%03d.bin", i%17, i%3, i)
		lb.tree[p] = sha256.Sum256(data)
		files = append(files, proto.WriteFile{Path: p, Data: data, MkdirAll: true})
	}
	if err := c.WriteFiles(ctx(t), &proto.WriteFilesRequest{Root: lb.info.Workspace, Files: files}); err != nil {
		t.Fatalf("write the tree: %v", err)
	}
	lb.rootfsPath = "lifecycle-" + randHex(4)
	lb.rootfsData = []byte("outside the workspace " + randHex(8) + "\n")
	if err := c.WriteFiles(ctx(t), &proto.WriteFilesRequest{Root: "/var/tmp", Files: []proto.WriteFile{{Path: lb.rootfsPath, Data: lb.rootfsData}}}); err != nil {
		t.Fatalf("write a file in the sandbox's own file system: %v", err)
	}
	lb.checkFiles(t, c, "once written")
}

// checkFiles reads the whole tree back and compares it byte for byte (by
// checksum), with no file missing or added, and the file outside the
// workspace.
func (lb *lifeBox) checkFiles(t *testing.T, c *agent.Client, when string) {
	t.Helper()
	w, err := c.Walk(ctx(t), &proto.WalkRequest{Root: lb.info.Workspace, Path: "tree"})
	if err != nil {
		t.Fatalf("%s: walk the tree: %v", when, err)
	}
	var got []string
	for _, f := range w.Files {
		if !f.IsDir {
			got = append(got, "tree/"+f.Path)
		}
	}
	want := make([]string, 0, len(lb.tree))
	for p := range lb.tree {
		want = append(want, p)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: the tree holds %d files, want the %d written (first missing or extra: %s)", when, len(got), len(want), firstDiff(got, want))
	}
	rf, err := c.ReadFiles(ctx(t), &proto.ReadFilesRequest{Root: lb.info.Workspace, Paths: want})
	if err != nil {
		t.Fatalf("%s: read the tree: %v", when, err)
	}
	bad := 0
	for _, f := range rf.Files {
		if f.Skipped != "" || sha256.Sum256(f.Data) != lb.tree[f.Path] {
			if bad == 0 {
				t.Errorf("%s: %s differs from what was written (skipped: %q, %d bytes)", when, f.Path, f.Skipped, len(f.Data))
			}
			bad++
		}
	}
	if bad > 0 || len(rf.Files) != len(want) {
		t.Fatalf("%s: %d of %d files differ (%d read)", when, bad, len(want), len(rf.Files))
	}
	r, err := c.ReadFile(ctx(t), &proto.ReadFileRequest{Root: "/var/tmp", Path: lb.rootfsPath})
	if err != nil || string(r.Data) != string(lb.rootfsData) {
		t.Fatalf("%s: /var/tmp/%s = %+v, %v; want what was written there", when, lb.rootfsPath, r, err)
	}
}

func firstDiff(a, b []string) string {
	for i := range max(len(a), len(b)) {
		switch {
		case i >= len(a):
			return "missing " + b[i]
		case i >= len(b):
			return "extra " + a[i]
		case a[i] != b[i]:
			return a[i] + " / " + b[i]
		}
	}
	return "none"
}

// inspect asks b for the sandbox and fails unless it is in state want.
func (lb *lifeBox) inspect(t *testing.T, b sandbox.Backend, want string) sandbox.Info {
	t.Helper()
	info, err := b.Inspect(ctx(t), lb.info.ID)
	if err != nil || info.State != want {
		t.Fatalf("Inspect = %q, %v; want state %s", info.State, err, want)
	}
	list, err := b.List(ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(list, func(i sandbox.Info) bool { return i.ID == lb.info.ID })
	// An engine's listing may leave the time out (Docker's gives no start
	// or exit times); one it gives must be Inspect's.
	if i < 0 || list[i].State != want || !list[i].StateSince.IsZero() && !list[i].StateSince.Equal(info.StateSince) {
		t.Fatalf("List reports %+v; want the sandbox %s since %s, as Inspect does", list, want, info.StateSince)
	}
	return info
}

// checkSince fails unless info entered its state between from and to.
func checkSince(t *testing.T, info sandbox.Info, from, to time.Time) {
	t.Helper()
	if info.StateSince.Before(from.Add(-sinceSlack)) || info.StateSince.After(to.Add(sinceSlack)) {
		t.Fatalf("the sandbox is %s since %v; want a time between %v and %v", info.State, info.StateSince, from, to)
	}
}

// counter is a process printing a line number and the time, ten times a
// second; marker is its $0, so that it can be found in /proc.
type counter struct {
	id, marker string
	pid        int
	next       int64
	// times are when each line was printed, in order.
	times []time.Time
}

func startCounter(t *testing.T, c *agent.Client) *counter {
	t.Helper()
	k := &counter{marker: "lifecycle-counter-" + randHex(4)}
	p, err := c.ProcStart(ctx(t), &proto.ProcStartRequest{
		Argv: []string{"sh", "-c", `i=0; while :; do i=$((i+1)); echo "$i $(date +%s%N)"; sleep 0.1; done`, k.marker},
	})
	if err != nil {
		t.Fatalf("start the counter: %v", err)
	}
	k.id, k.pid = p.ID, p.PID
	k.waitPast(t, c, time.Now())
	return k
}

// read takes the counter's new output; it fails when the counter ended.
func (k *counter) read(t *testing.T, c *agent.Client) {
	t.Helper()
	r, err := c.ProcOutput(ctx(t), &proto.ProcOutputRequest{ID: k.id, Since: k.next})
	if err != nil {
		t.Fatalf("read the counter: %v", err)
	}
	if r.Dropped > 0 {
		t.Fatalf("the counter's output lost %d bytes before it was read", r.Dropped)
	}
	var out []byte
	for _, ch := range r.Chunks {
		if ch.Stream == "stdout" {
			out = append(out, ch.Data...)
		}
	}
	// A line is taken only once whole; the rest is read again next time.
	whole := strings.LastIndexByte(string(out), '\n') + 1
	for _, l := range strings.Split(string(out[:whole]), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("the counter printed %q", l)
		}
		k.times = append(k.times, time.Unix(0, ns))
	}
	k.next = r.Next - int64(len(out)-whole)
	if r.Process.State != proto.ProcRunning || r.Process.PID != k.pid {
		t.Fatalf("the counter is %+v; want it running as pid %d", r.Process, k.pid)
	}
}

// waitPast reads until the counter printed a line after at (bounded).
func (k *counter) waitPast(t *testing.T, c *agent.Client, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		k.read(t, c)
		if n := len(k.times); n > 0 && k.times[n-1].After(at) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter printed nothing after %v within 30s", at)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkFrozen fails if the counter printed a line between from and to.
func (k *counter) checkFrozen(t *testing.T, from, to time.Time) {
	t.Helper()
	for _, at := range k.times {
		if at.After(from) && at.Before(to) {
			t.Fatalf("the counter printed a line at %v, while the sandbox was paused (%v to %v)", at, from, to)
		}
	}
}

// running lists the command lines of the sandbox's processes that carry
// marker (the scanning shell's own is left out).
func running(t *testing.T, c *agent.Client, marker string) []string {
	t.Helper()
	out, code := sh(t, c, `for p in /proc/[0-9]*; do [ "${p#/proc/}" = "$$" ] || { tr '\0' ' ' < "$p/cmdline"; echo; }; done`)
	if code != 0 {
		t.Fatalf("list the sandbox's processes: exit %d: %s", code, out)
	}
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, marker) {
			found = append(found, l)
		}
	}
	return found
}

// lifecycle is the whole journey of one sandbox: paused and unpaused many
// times, hibernated and woken, every verb done twice.
func (s *suite) lifecycle(t *testing.T) {
	lb := s.lifeBox(t, "c-life")
	c := lb.dial(t)
	lb.writeFiles(t, c)
	k := startCounter(t, c)
	if found := running(t, c, k.marker); len(found) == 0 {
		t.Fatalf("the counter %s is not among the sandbox's processes", k.marker)
	}

	for i := range pauseCycles {
		when := fmt.Sprintf("pause %d", i+1)
		called := time.Now()
		if err := lb.fr.Pause(ctx(t), lb.info.ID); err != nil {
			t.Fatalf("%s: Pause: %v", when, err)
		}
		frozenFrom := time.Now()
		info := lb.inspect(t, s.b, sandbox.StatePaused)
		if i == 0 {
			checkSince(t, info, called, frozenFrom)
			// A pause of a paused sandbox changes nothing, and a new
			// backend (a restarted sandboxd) sees the same.
			if err := lb.fr.Pause(ctx(t), lb.info.ID); err != nil {
				t.Fatalf("a second Pause: %v", err)
			}
			again := lb.inspect(t, s.newBackend(t, s.dep), sandbox.StatePaused)
			if !again.StateSince.Equal(info.StateSince) {
				t.Fatalf("after a second Pause the sandbox is paused since %v, want %v as after the first", again.StateSince, info.StateSince)
			}
		}
		time.Sleep(pauseHold)
		frozenTo := time.Now()
		if err := lb.fr.Unpause(ctx(t), lb.info.ID); err != nil {
			t.Fatalf("%s: Unpause: %v", when, err)
		}
		info = lb.inspect(t, s.b, sandbox.StateRunning)
		if i == 0 {
			// Running since the thaw, or since the container's start where
			// the engine keeps only that (Docker).
			if info.StateSince.Before(frozenTo.Add(-sinceSlack)) {
				checkSince(t, info, lb.info.CreatedAt, time.Now())
			} else {
				checkSince(t, info, frozenTo, time.Now())
			}
			if err := lb.fr.Unpause(ctx(t), lb.info.ID); err != nil {
				t.Fatalf("a second Unpause: %v", err)
			}
			if again := lb.inspect(t, s.b, sandbox.StateRunning); !again.StateSince.Equal(info.StateSince) {
				t.Fatalf("after a second Unpause the sandbox runs since %v, want %v as after the first", again.StateSince, info.StateSince)
			}
		}
		// The pipe opened before the pause answers, and the counter goes on
		// in the same process, having printed nothing while frozen.
		k.waitPast(t, c, frozenTo)
		k.checkFrozen(t, frozenFrom, frozenTo)
		lb.checkFiles(t, c, "after "+when)
	}

	called := time.Now()
	if err := lb.hb.Hibernate(ctx(t), lb.info.ID); err != nil {
		t.Fatalf("Hibernate: %v", err)
	}
	returned := time.Now()
	waitDone(t, c)
	info := lb.inspect(t, s.b, sandbox.StateHibernated)
	checkSince(t, info, called, returned)
	// Another replica, or a restarted sandboxd, sees the same.
	fresh := lb.inspect(t, s.newBackend(t, s.dep), sandbox.StateHibernated)
	if !fresh.StateSince.Equal(info.StateSince) {
		t.Fatalf("a new backend reports the sandbox hibernated since %v, want %v", fresh.StateSince, info.StateSince)
	}
	_, err := s.b.AttachAgent(ctx(t), lb.info.ID)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "hibernated") {
		t.Fatalf("AttachAgent on a hibernated sandbox = %v; want failed_precondition saying it is hibernated", err)
	}
	if err := lb.hb.Hibernate(ctx(t), lb.info.ID); err != nil {
		t.Fatalf("a second Hibernate: %v", err)
	}
	if again := lb.inspect(t, s.b, sandbox.StateHibernated); !again.StateSince.Equal(info.StateSince) {
		t.Fatalf("after a second Hibernate the sandbox is hibernated since %v, want %v as after the first", again.StateSince, info.StateSince)
	}

	called = time.Now()
	if err := lb.hb.Wake(ctx(t), lb.info.ID); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	info = lb.inspect(t, s.b, sandbox.StateRunning)
	checkSince(t, info, called, time.Now())
	c2 := lb.dial(t)
	lb.checkFiles(t, c2, "after the wake")
	if found := running(t, c2, k.marker); len(found) > 0 {
		t.Fatalf("the counter runs after the hibernation: %q", found)
	}
	if p, err := c2.ProcGet(ctx(t), k.id, 0); err == nil && p.State == proto.ProcRunning {
		t.Fatalf("the agent lists the counter as running after the hibernation: %+v", p)
	}
	if err := lb.hb.Wake(ctx(t), lb.info.ID); err != nil {
		t.Fatalf("a second Wake: %v", err)
	}
	if again := lb.inspect(t, s.b, sandbox.StateRunning); !again.StateSince.Equal(info.StateSince) {
		t.Fatalf("after a second Wake the sandbox runs since %v, want %v as after the first", again.StateSince, info.StateSince)
	}
	// The second Wake did not start the sandbox again under the pipe.
	if _, err := c2.ProcList(ctx(t), nil); err != nil {
		t.Fatalf("the pipe opened after the wake fails after a second Wake: %v", err)
	}
	lb.checkFiles(t, c2, "after a second wake")
}

// hibernatePaused: a paused sandbox hibernates (its processes thawed to be
// stopped) and wakes with its files.
func (s *suite) hibernatePaused(t *testing.T) {
	lb := s.lifeBox(t, "c-life-paused")
	c := lb.dial(t)
	lb.writeFiles(t, c)
	if err := lb.fr.Pause(ctx(t), lb.info.ID); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	called := time.Now()
	if err := lb.hb.Hibernate(ctx(t), lb.info.ID); err != nil {
		t.Fatalf("Hibernate of a paused sandbox: %v", err)
	}
	checkSince(t, lb.inspect(t, s.b, sandbox.StateHibernated), called, time.Now())
	if err := lb.fr.Unpause(ctx(t), lb.info.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Unpause of a hibernated sandbox = %v; want failed_precondition", err)
	}
	if err := lb.hb.Wake(ctx(t), lb.info.ID); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	lb.inspect(t, s.b, sandbox.StateRunning)
	lb.checkFiles(t, lb.dial(t), "after the wake")
}

// lifecycleMissing: every verb on a sandbox that does not exist is
// not_found.
func (s *suite) lifecycleMissing(t *testing.T) {
	fr, hb := s.b.(sandbox.Freezer), s.b.(sandbox.Hibernator)
	id := "0000" + randHex(4)
	for name, verb := range map[string]func() error{
		"Pause":     func() error { return fr.Pause(ctx(t), id) },
		"Unpause":   func() error { return fr.Unpause(ctx(t), id) },
		"Hibernate": func() error { return hb.Hibernate(ctx(t), id) },
		"Wake":      func() error { return hb.Wake(ctx(t), id) },
	} {
		if err := verb(); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s of a sandbox that does not exist = %v; want not_found", name, err)
		}
	}
}
