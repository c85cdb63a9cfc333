package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/cluster/clustertest"
	"github.com/sandboxd/sandboxd/errdefs"
)

// These tests run two or three Owners in one process against a real API
// server (SANDBOXD_TEST_KUBERNETES=1 and KUBECONFIG, as scripts/k8s-up.sh
// writes them): optimistic concurrency, watch events and lease expiry are
// the API server's, not a fake's.

const (
	testLease = 2 * time.Second
	testRenew = 400 * time.Millisecond
)

// replicaUnderTest is one Owners with its own life and a record of what
// its hooks heard.
type replicaUnderTest struct {
	*Owners
	stop   context.CancelFunc
	mu     sync.Mutex
	taken  []int64
	lost   []string
	clock  atomic.Int64 // added to time.Now: a paused process's view
	events chan string
}

func startReplica(t *testing.T, cs kubernetes.Interface, ns, id string, more ...func(*Options)) *replicaUnderTest {
	t.Helper()
	r := &replicaUnderTest{events: make(chan string, 64)}
	o := Options{
		Namespace: ns, Deployment: "t", Self: Peer{Identity: id, URL: "http://127.0.0.1:1/" + id},
		LeaseDuration: testLease, RenewInterval: testRenew,
		Now: func() time.Time { return time.Now().Add(time.Duration(r.clock.Load())) },
		Hooks: Hooks{
			Taken: func(_ context.Context, k Key, epoch int64) {
				r.mu.Lock()
				r.taken = append(r.taken, epoch)
				r.mu.Unlock()
			},
			Lost: func(k Key, why string) {
				r.mu.Lock()
				r.lost = append(r.lost, why)
				r.mu.Unlock()
				r.events <- "lost: " + why
			},
		},
	}
	for _, f := range more {
		f(&o)
	}
	r.Owners = NewOwners(cs, o)
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

func resolveCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitLocal resolves k on r until r serves it or the deadline passes; it
// returns how long that took.
func waitLocal(t *testing.T, r *replicaUnderTest, k Key, within time.Duration) (Route, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		route, err := r.Resolve(resolveCtx(t), k, true)
		if err == nil && route.Local {
			return route, time.Since(start)
		}
		if err != nil && !errors.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("resolve: %v", err)
		}
		if time.Since(start) > within {
			t.Fatalf("%s did not come to own %s within %s (last: %+v, %v)", r.o.Self.Identity, k, within, route, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestClusterLeasesOneOwnerAtATime(t *testing.T) {
	cs, ns := clustertest.Namespace(t, "sbx-leases")
	a, b, c := startReplica(t, cs, ns, "a"), startReplica(t, cs, ns, "b"), startReplica(t, cs, ns, "c")
	k := Key{Tenant: "team:x", Conversation: "conv-1"}

	// Three replicas racing for a new conversation: exactly one wins, the
	// others are told where it is.
	var wg sync.WaitGroup
	routes := make([]Route, 3)
	for i, r := range []*replicaUnderTest{a, b, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				route, err := r.Resolve(resolveCtx(t), k, true)
				if err == nil {
					routes[i] = route
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	var owner *replicaUnderTest
	for i, r := range []*replicaUnderTest{a, b, c} {
		if routes[i].Local {
			if owner != nil {
				t.Fatalf("both %s and %s serve %s", owner.o.Self.Identity, r.o.Self.Identity, k)
			}
			owner = r
			routes[i].Done()
		}
	}
	if owner == nil {
		t.Fatalf("nobody serves %s: %+v", k, routes)
	}
	for i, r := range []*replicaUnderTest{a, b, c} {
		if r != owner && (routes[i].Peer.Identity != owner.o.Self.Identity || routes[i].Peer.URL != owner.o.Self.URL) {
			t.Fatalf("%s routes %s to %+v, want %s", r.o.Self.Identity, k, routes[i].Peer, owner.o.Self.Identity)
		}
	}
	if got := a.Owned() + b.Owned() + c.Owned(); got != 1 {
		t.Fatalf("%d leases held for one conversation", got)
	}
	// Renewals keep it: after several lease durations it has not moved.
	time.Sleep(3 * testLease)
	if route, err := owner.Resolve(resolveCtx(t), k, true); err != nil || !route.Local {
		t.Fatalf("the owner lost a lease it renews: %+v %v", route, err)
	} else {
		route.Done()
	}
	if peers := a.Peers(); len(peers) != 3 {
		t.Fatalf("replica a sees peers %+v, want a, b and c", peers)
	}
}

func TestClusterDeadOwnerIsTakenOverAfterTheLease(t *testing.T) {
	cs, ns := clustertest.Namespace(t, "sbx-leases")
	a, b := startReplica(t, cs, ns, "a"), startReplica(t, cs, ns, "b")
	k := Key{Tenant: "t", Conversation: "c"}
	route, _ := waitLocal(t, a, k, 5*time.Second)
	route.Done()
	epoch := route.Epoch

	a.stop() // a dies: no more renewals
	killed := time.Now()
	if route, err := b.Resolve(resolveCtx(t), k, true); err != nil || route.Local || route.Peer.Identity != "a" {
		t.Fatalf("right after a stopped, b should still route to a: %+v %v", route, err)
	}
	route, took := waitLocal(t, b, k, 4*testLease)
	route.Done()
	if since := time.Since(killed); since < testLease {
		t.Fatalf("b took the lease %s after a's last renewal, before it could have expired (%s)", since, testLease)
	}
	if route.Epoch <= epoch {
		t.Fatalf("the new owner's epoch %d is not above the old one's %d", route.Epoch, epoch)
	}
	t.Logf("takeover %s after the owner stopped", took)
	// The old owner, still running but without renewals, stands down by
	// its own clock before anyone could take over.
	if _, err := a.Epoch(k); err == nil {
		t.Fatal("a dead owner still hands out its epoch")
	}
}

func TestClusterPausedOwnerStandsDown(t *testing.T) {
	cs, ns := clustertest.Namespace(t, "sbx-leases")
	a, b := startReplica(t, cs, ns, "a"), startReplica(t, cs, ns, "b")
	k := Key{Tenant: "t", Conversation: "paused"}
	route, _ := waitLocal(t, a, k, 5*time.Second)
	route.Done()

	// A paused process: its clock jumps past the lease while it did
	// nothing. It must not serve on its stale belief.
	a.clock.Store(int64(2 * testLease))
	if route, err := a.Resolve(resolveCtx(t), k, false); err == nil && route.Local {
		t.Fatal("a replica whose lease ran out while it was paused still serves")
	}
	select {
	case ev := <-a.events:
		t.Logf("a: %s", ev)
	case <-time.After(5 * time.Second):
		t.Fatal("the paused replica did not tell its hooks that it lost the conversation")
	}
	a.clock.Store(0)
	_ = b
}

func TestClusterDrainHandsOverAtOnce(t *testing.T) {
	cs, ns := clustertest.Namespace(t, "sbx-leases")
	a, b := startReplica(t, cs, ns, "a"), startReplica(t, cs, ns, "b")
	k1, k2 := Key{Tenant: "t", Conversation: "one"}, Key{Tenant: "t", Conversation: "two"}
	r1, _ := waitLocal(t, a, k1, 5*time.Second)
	r2, _ := waitLocal(t, a, k2, 5*time.Second)
	r2.Done()

	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Drain(ctx)
	}()
	// k2 has no call in flight: released at once, b takes it well within
	// a lease duration.
	_, took := waitLocal(t, b, k2, testLease)
	if took > testLease/2+time.Second {
		t.Fatalf("b waited %s for a released lease", took)
	}
	// k1's call is still running: a keeps serving it, and b holds a new
	// request for it until a releases it, then serves it at once.
	held := make(chan Route, 1)
	go func() {
		route, err := b.Resolve(resolveCtx(t), k1, true)
		if err != nil {
			t.Errorf("b's held request for k1: %v", err)
		}
		held <- route
	}()
	select {
	case route := <-held:
		t.Fatalf("b answered for a conversation whose call still runs on the draining replica: %+v", route)
	case <-time.After(time.Second):
	}
	if err := a.Ready(); err == nil {
		t.Fatal("a draining replica says it is ready")
	}
	if route, err := a.Resolve(resolveCtx(t), Key{Tenant: "t", Conversation: "new"}, true); err != nil || route.Local || route.Peer.Identity != "b" {
		t.Fatalf("a draining replica should hand a new conversation to b, got %+v %v", route, err)
	}
	released := time.Now()
	r1.Done()
	select {
	case route := <-held:
		if !route.Local {
			t.Fatalf("b's held request was not served by b: %+v", route)
		}
		route.Done()
		if d := time.Since(released); d > testLease/2+time.Second {
			t.Fatalf("b served the held request %s after the call ended", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b's held request never came back")
	}
	<-done
	a.mu.Lock()
	lost := len(a.lost)
	a.mu.Unlock()
	if lost != 2 {
		t.Fatalf("the draining replica told its hooks of %d hand-overs, want 2", lost)
	}
	// b learns of a's member lease going through its informer: wait for it.
	eventually(t, "b seeing only itself after a drained", func() bool {
		peers := b.Peers()
		return len(peers) == 1 && peers[0].Identity == "b"
	})
}

// TestClusterClockSkewTolerated: replicas whose wall clocks are 10 s
// behind and ahead of the others (20 s apart, within the 30 s allowance) neither take
// a live owner's lease nor keep a dead one's: expiry is told by watching
// the lease stay unchanged on each replica's own monotonic clock.
func TestClusterClockSkewTolerated(t *testing.T) {
	cs, ns := clustertest.Namespace(t, "sbx-skew")
	skew := func(d time.Duration) func(*Options) {
		return func(o *Options) { o.Wall = func() time.Time { return time.Now().Add(d) } }
	}
	a := startReplica(t, cs, ns, "a", skew(-10*time.Second))
	b := startReplica(t, cs, ns, "b")
	c := startReplica(t, cs, ns, "c", skew(10*time.Second))
	k := Key{Tenant: "t", Conversation: "skewed"}
	route, _ := waitLocal(t, a, k, 5*time.Second)
	route.Done()
	deadline := time.Now().Add(3 * testLease)
	for time.Now().Before(deadline) {
		for _, r := range []*replicaUnderTest{b, c} {
			route, err := r.Resolve(resolveCtx(t), k, true)
			if err == nil && route.Local {
				t.Fatalf("%s took the lease of a live owner whose clock is 10 s off", r.o.Self.Identity)
			}
			if err == nil && route.Peer.Identity != "a" {
				t.Fatalf("%s routes to %+v, want a", r.o.Self.Identity, route.Peer)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	a.stop()
	route, took := waitLocal(t, c, k, 4*testLease)
	route.Done()
	if took < testLease/2 {
		t.Fatalf("c, whose clock is ahead, took the dead owner's lease after %s, before its duration", took)
	}
}
