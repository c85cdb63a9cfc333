package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// poolFake is a fakeBackend that can claim pool boxes, and lacks some images.
type poolFake struct {
	*fakeBackend
	missing  map[string]bool // images Create refuses
	conflict int             // claims still to fail with Conflict (another replica won)
	claims   int

	slow              time.Duration // each Create takes this long
	inflight, maxSeen atomic.Int32  // Creates running now, and the most at once
	tries             atomic.Int32  // Creates asked for, failed or not
}

var _ Claimer = (*poolFake)(nil)

func newPoolFake(t *testing.T, missing ...string) *poolFake {
	f := &poolFake{fakeBackend: newFake(t), missing: map[string]bool{}}
	f.wsRoot = t.TempDir() // refills may make boxes until the Manager closes
	for _, img := range missing {
		f.missing[img] = true
	}
	return f
}

func (f *poolFake) Create(ctx context.Context, spec Spec) (Info, error) {
	f.tries.Add(1)
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxSeen.Load()
		if n <= m || f.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(f.slow)
	if f.missing[spec.Image] {
		return Info{}, errdefs.FailedPrecondition("image %s is not on the fake engine; build it", spec.Image)
	}
	return f.fakeBackend.Create(ctx, spec)
}

func (f *poolFake) Claim(ctx context.Context, warm Info, owner Owner) (Info, error) {
	id := warm.ID
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	b, ok := f.boxes[id]
	if !ok {
		return Info{}, errdefs.NotFound("no box %s", id)
	}
	if f.conflict > 0 || b.Labels[LabelPool] == "" || b.Conversation != "" {
		f.conflict--
		b.Tenant, b.Conversation = "someone", "else" // the other replica's claim
		f.boxes[id] = b
		return Info{}, errdefs.Conflict("box %s was claimed already", id)
	}
	b.Tenant, b.Conversation = owner.Tenant, owner.Conversation
	labels := map[string]string{}
	for k, v := range b.Labels {
		labels[k] = v
	}
	labels[LabelTenant], labels[LabelConversation] = owner.Tenant, owner.Conversation
	b.Labels = labels
	f.boxes[id] = b
	return b, nil
}

func (f *poolFake) unclaimed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.boxes {
		if unclaimed(b) {
			n++
		}
	}
	return n
}

func ready(m *Manager, image string) int {
	for _, s := range m.PoolStats() {
		if s.Image == image {
			return s.Ready
		}
	}
	return -1
}

func claims(m *Manager, image, outcome string) uint64 {
	for _, s := range m.PoolStats() {
		if s.Image == image {
			return s.Claims[outcome]
		}
	}
	return 0
}

func TestPoolClaimHandsOutAWarmSandboxAndRefills(t *testing.T) {
	f := newPoolFake(t)
	m := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 2}))
	ctx := testCtx(t)
	eventually(t, "the pool holds 2", func() bool { return ready(m, "img") == 2 })
	creates, _, attaches := f.stats()

	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1", Image: "img", Network: "none"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if info.Tenant != "acme" || info.Conversation != "c1" || info.Labels[LabelPool] != PoolKey("img") {
		t.Fatalf("claimed sandbox = %+v, want acme/c1 from pool %s", info, PoolKey("img"))
	}
	if got := claims(m, "img", PoolClaimed); got != 1 {
		t.Errorf("claimed outcome = %d, want 1", got)
	}
	// The warm pipe is handed over: the first tool call opens none.
	c, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	if _, err := c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatalf("Exec in the claimed sandbox: %v", err)
	}
	eventually(t, "the pool refilled", func() bool { return ready(m, "img") == 2 })
	if _, _, a := f.stats(); a != attaches+1 {
		t.Errorf("attaches = %d, want %d (the refill's only: the claimed pipe was reused)", a, attaches+1)
	}
	if c2, _, _ := f.stats(); c2 != creates+1 {
		t.Errorf("creates after one claim = %d, want %d (one refill, no cold create)", c2, creates+1)
	}

	second, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c2", Image: "img"})
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if second.ID == info.ID {
		t.Fatalf("the second claim got the first's sandbox %s", info.ID)
	}
	if got, err := m.Lookup(ctx, "acme", "c1"); err != nil || got.ID != info.ID {
		t.Fatalf("Lookup(c1) = %v, %v; want %s", got.ID, err, info.ID)
	}
	if _, err := m.Lookup(ctx, "other", "c1"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's Lookup(c1) = %v, want not found", err)
	}
	if n := m.Counts()[StateRunning]; n != 2 {
		t.Errorf("running sandboxes = %d, want 2: warm ones are not anyone's", n)
	}
}

func TestPoolClaimCarriesNothingOfAPreviousClaim(t *testing.T) {
	f := newPoolFake(t)
	m := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 1}))
	ctx := testCtx(t)
	seen := map[string]bool{}
	for i, tenant := range []string{"alice", "bob", "alice"} {
		eventually(t, "the pool holds 1", func() bool { return ready(m, "img") == 1 })
		info, err := m.Create(ctx, Spec{Tenant: tenant, Conversation: "c", Image: "img"})
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if seen[info.ID] {
			t.Fatalf("claim %d handed out sandbox %s again", i, info.ID)
		}
		seen[info.ID] = true
		if info.Tenant != tenant {
			t.Fatalf("claim %d: tenant %q, want %q", i, info.Tenant, tenant)
		}
		// What the previous owner left is gone with its sandbox.
		if _, err := m.Lookup(ctx, tenant, "c"); err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		if err := m.Delete(ctx, tenant, info.ID); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := f.Inspect(ctx, info.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("a deleted claimed sandbox is still in the backend: %v", err)
		}
	}
	if got := claims(m, "img", PoolClaimed); got != 3 {
		t.Errorf("claims = %d, want 3", got)
	}
}

// echoIn runs script in the conversation's sandbox and returns its output.
func echoIn(t *testing.T, m *Manager, tenant, conv, script string, env map[string]string) string {
	t.Helper()
	c, _, err := m.Agent(testCtx(t), tenant, conv)
	if err != nil {
		t.Fatalf("Agent(%s/%s): %v", tenant, conv, err)
	}
	r, err := c.Exec(testCtx(t), &proto.ExecRequest{Argv: []string{"sh", "-c", script}, Env: env})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec %q in %s/%s: %v %+v", script, tenant, conv, err, r)
	}
	return strings.TrimSpace(string(r.Stdout))
}

// A spec with env is claimed from the pool and its commands see the env
// under their own; the next claim's sandbox has none of it.
func TestPoolClaimAppliesEnv(t *testing.T) {
	f := newPoolFake(t)
	m := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 1}))
	ctx := testCtx(t)
	eventually(t, "the pool holds 1", func() bool { return ready(m, "img") == 1 })
	info, err := m.Create(ctx, Spec{Tenant: "alice", Conversation: "c", Image: "img", Env: map[string]string{"FOO": "bar", "BAZ": "1"}})
	if err != nil {
		t.Fatalf("Create with env: %v", err)
	}
	if info.Labels[LabelPool] == "" || claims(m, "img", PoolClaimed) != 1 {
		t.Fatalf("a create with env was not served from the pool: %+v", info)
	}
	if got := echoIn(t, m, "alice", "c", `echo "$FOO $BAZ"`, nil); got != "bar 1" {
		t.Errorf("the claimed sandbox sees %q, want \"bar 1\"", got)
	}
	if got := echoIn(t, m, "alice", "c", `echo "$FOO $BAZ"`, map[string]string{"FOO": "mine"}); got != "mine 1" {
		t.Errorf("an exec with its own FOO sees %q, want \"mine 1\"", got)
	}

	eventually(t, "the pool refilled", func() bool { return ready(m, "img") == 1 })
	next, err := m.Create(ctx, Spec{Tenant: "bob", Conversation: "c", Image: "img"})
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if next.ID == info.ID || next.Labels[LabelPool] == "" {
		t.Fatalf("second claim got %+v, want another pool sandbox than %s", next, info.ID)
	}
	if got := echoIn(t, m, "bob", "c", `echo "${FOO-unset} ${BAZ-unset}"`, nil); got != "unset unset" {
		t.Errorf("the next claim's sandbox sees %q of the previous claim's env, want none", got)
	}
}

// A warm sandbox whose agent refuses the env (here: it ran a command
// already) is not handed out; the claim takes the next, or goes cold.
func TestPoolClaimDiscardsASandboxThatRefusesTheEnv(t *testing.T) {
	f := newPoolFake(t)
	m := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 2}))
	ctx := testCtx(t)
	eventually(t, "the pool holds 2", func() bool { return ready(m, "img") == 2 })
	p := m.pools["img"]
	p.mu.Lock()
	used := p.ready[0]
	p.mu.Unlock()
	if _, err := used.c.Exec(ctx, &proto.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	info, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c", Image: "img", Env: map[string]string{"FOO": "bar"}})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if info.ID == used.info.ID || info.Labels[LabelPool] == "" {
		t.Fatalf("claimed %+v; want the second warm sandbox, not %s which refused the env", info, used.info.ID)
	}
	if got := echoIn(t, m, "t", "c", `echo "$FOO"`, nil); got != "bar" {
		t.Errorf("the second warm sandbox sees FOO=%q, want bar", got)
	}
	eventually(t, "the refusing one was removed", func() bool { _, err := f.Inspect(ctx, used.info.ID); return err != nil })
}

func TestPoolWithMissingImageSaysSoAndColdCreatesWork(t *testing.T) {
	f := newPoolFake(t, "gone:latest")
	m := startManager(t, f, WithPools(PoolSpec{Image: "gone:latest", Size: 2}, PoolSpec{Image: "img", Size: 1}))
	ctx := testCtx(t)
	eventually(t, "the pool says why it cannot refill", func() bool { return len(m.PoolProblems()) == 1 })
	p := m.PoolProblems()[0]
	if !strings.Contains(p, "pool gone:latest cannot refill") || !strings.Contains(p, "not on the fake engine") {
		t.Errorf("problem = %q, want the pool and the missing image named", p)
	}
	for _, s := range m.PoolStats() {
		if s.Image == "gone:latest" && (s.RefillFailures == 0 || s.Ready != 0) {
			t.Errorf("stat of the broken pool = %+v, want failures and nothing ready", s)
		}
	}
	// Cold creates of other images work.
	if _, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "cold", Image: "other"}); err != nil {
		t.Fatalf("cold Create of another image: %v", err)
	}
	// The broken pool's image falls back to a cold create, which says why.
	_, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c", Image: "gone:latest"})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("Create of the missing image = %v, want failed_precondition", err)
	}
	if got := claims(m, "gone:latest", PoolEmpty); got != 1 {
		t.Errorf("empty outcome = %d, want 1", got)
	}
	// The healthy pool is not held back.
	eventually(t, "the other pool holds 1", func() bool { return ready(m, "img") == 1 })
}

func TestPoolMismatchedSpecIsCreatedCold(t *testing.T) {
	f := newPoolFake(t)
	m := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 1}))
	ctx := testCtx(t)
	eventually(t, "the pool holds 1", func() bool { return ready(m, "img") == 1 })
	for i, spec := range []Spec{
		{Resources: Resources{MemoryMB: 512}},
		{Network: "bridge"},
		{HostWorkspace: t.TempDir()},
	} {
		spec.Tenant, spec.Conversation, spec.Image = "t", "c"+string(rune('0'+i)), "img"
		info, err := m.Create(ctx, spec)
		if err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
		if info.Labels[LabelPool] != "" {
			t.Errorf("spec %d was served from the pool: %+v", i, spec)
		}
	}
	if ready(m, "img") != 1 {
		t.Errorf("the pool was drawn from")
	}
}

func TestPoolClaimSkipsSandboxesClaimedElsewhereOrDead(t *testing.T) {
	f := newPoolFake(t)
	m := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 3}))
	ctx := testCtx(t)
	eventually(t, "the pool holds 3", func() bool { return ready(m, "img") == 3 })
	// The oldest warm sandbox's agent dies; the next is claimed by another replica.
	p := m.pools["img"]
	p.mu.Lock()
	first := p.ready[0].info.ID
	p.mu.Unlock()
	f.mu.Lock()
	f.daemons[first].Close()
	f.conflict = 1
	f.mu.Unlock()
	info, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c", Image: "img"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if info.Tenant != "t" || info.Labels[LabelPool] == "" {
		t.Fatalf("got %+v, want the third warm sandbox", info)
	}
	if info.ID == first {
		t.Fatalf("a sandbox whose agent died was handed out")
	}
	eventually(t, "the dead one was removed", func() bool { _, err := f.Inspect(ctx, first); return err != nil })
}

func TestPoolRestartRemovesLeftoversAndFindsClaims(t *testing.T) {
	f := newPoolFake(t)
	m := NewManager(f, WithPools(PoolSpec{Image: "img", Size: 2}))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	eventually(t, "the pool holds 2", func() bool { return ready(m, "img") == 2 })
	info, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c", Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool refilled", func() bool { return ready(m, "img") == 2 })
	m.Close()
	left := map[string]bool{}
	f.mu.Lock()
	for id, b := range f.boxes {
		if unclaimed(b) {
			left[id] = true
		}
	}
	f.mu.Unlock()

	m2 := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 2}))
	got, err := m2.Lookup(ctx, "t", "c")
	if err != nil || got.ID != info.ID {
		t.Fatalf("after a restart Lookup = %v, %v; want %s", got.ID, err, info.ID)
	}
	eventually(t, "the restarted pool holds 2 new ones", func() bool {
		if ready(m2, "img") != 2 {
			return false
		}
		p := m2.pools["img"]
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, w := range p.ready {
			if left[w.info.ID] {
				return false
			}
		}
		return f.unclaimed() == 2
	})
}

func TestPoolsNeedAClaimingBackend(t *testing.T) {
	m := NewManager(newFake(t), WithPools(PoolSpec{Image: "img", Size: 1}))
	defer m.Close()
	err := m.Start(context.Background())
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "pools") {
		t.Fatalf("Start = %v, want failed_precondition naming pools", err)
	}
}

func TestPoolRefillIsBoundedAndBacksOff(t *testing.T) {
	f := newPoolFake(t, "gone:1")
	f.slow = 30 * time.Millisecond
	m := startManager(t, f, WithPools(PoolSpec{Image: "img", Size: 6}))
	eventually(t, "the pool holds 6", func() bool { return ready(m, "img") == 6 })
	if n := f.maxSeen.Load(); n > poolConcurrency {
		t.Errorf("%d warm-ups ran at once, want at most %d", n, poolConcurrency)
	}

	g := newPoolFake(t, "gone:1")
	mg := startManager(t, g, WithPools(PoolSpec{Image: "gone:1", Size: 4}))
	time.Sleep(2500 * time.Millisecond)
	// Two at once fail at the start, then the backoff (1 s, 2 s, ...)
	// holds the next two back for 2 s: at most 4 tries in 2.5 s.
	if n := g.tries.Load(); n < 2 || n > 4 {
		t.Errorf("a pool whose image is missing tried %d creates in 2.5 s, want 2 to 4 (a backoff)", n)
	}
	if len(mg.PoolProblems()) != 1 {
		t.Errorf("problems = %v, want the missing image's", mg.PoolProblems())
	}
}

func TestIdleReaperLeavesWarmSandboxes(t *testing.T) {
	f := newPoolFake(t)
	m := startManager(t, f, WithIdleTTL(200*time.Millisecond), WithPools(PoolSpec{Image: "img", Size: 2}))
	ctx := testCtx(t)
	eventually(t, "the pool holds 2", func() bool { return ready(m, "img") == 2 })
	info, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "c", Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	// The claimed one is anyone's sandbox: reaped once idle. The warm ones
	// are nobody's: never reaped, whatever their age.
	eventually(t, "the idle claimed sandbox is reaped", func() bool { _, err := f.Inspect(ctx, info.ID); return err != nil })
	eventually(t, "the pool refilled", func() bool { return ready(m, "img") == 2 })
	before := map[string]bool{}
	p := m.pools["img"]
	p.mu.Lock()
	for _, w := range p.ready {
		before[w.info.ID] = true
	}
	p.mu.Unlock()
	time.Sleep(700 * time.Millisecond) // several reap rounds
	for id := range before {
		if _, err := f.Inspect(ctx, id); err != nil {
			t.Errorf("warm sandbox %s was removed by the idle reaper: %v", id, err)
		}
	}
	if f.unclaimed() != 2 {
		t.Errorf("unclaimed pool sandboxes = %d, want the 2 warm ones", f.unclaimed())
	}
}
