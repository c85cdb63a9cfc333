package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Peer is a replica as the others reach it.
type Peer struct {
	Identity string
	URL      string
}

// Hooks are what the rest of sandboxd does when ownership changes.
type Hooks struct {
	// Taken runs after this replica took key's lease and before it serves
	// the first request for it (it adopts the conversation's runs).
	Taken func(ctx context.Context, k Key, epoch int64)
	// Lost runs when this replica must stop acting for key: its lease
	// expired, was taken, or is about to be released. It must not block
	// for long (it detaches the sandbox's pipe and forgets the runs).
	Lost func(k Key, why string)
}

// Options of an Owners.
type Options struct {
	Namespace     string
	Deployment    string
	Self          Peer
	LeaseDuration time.Duration
	RenewInterval time.Duration
	Hooks         Hooks
	Metrics       *Metrics
	Log           *slog.Logger
	// Now is the local clock (tests); it must carry a monotonic reading.
	Now func() time.Time
	// Wall is the wall clock written into leases and compared with theirs
	// (tests give a replica a skewed one); default time.Now.
	Wall func() time.Time
}

// skewAllowance is how far another replica's wall clock may be off ours:
// a lease whose renew time is older than its duration plus this is
// expired at once; otherwise it expires only after being seen unchanged
// for its whole duration.
const skewAllowance = 30 * time.Second

// apiTimeout bounds one call to the API server on the request path.
const apiTimeout = 5 * time.Second

// errDraining is the error for a request a shutting-down replica cannot serve
// and has no peer to hand to (errdefs.Unavailable: the client retries).
var errDraining = errdefs.Unavailable("this replica is shutting down and takes no conversation; retry, another replica will serve it")

// Owners holds this replica's conversation leases.
//
// Goroutines: the lease informer (started by Start, ended by its context),
// one renewer (renews every held lease and the member lease each renew
// interval), and a short-lived goroutine per lease being renewed. Shutdown:
// Drain releases every lease after its in-flight calls end and deletes the
// member lease; then the context given to Start is cancelled, which stops
// the renewer and the informer.
type Owners struct {
	o      Options
	cs     kubernetes.Interface
	leases coordlisters.LeaseNamespaceLister
	synced cache.InformerSynced
	margin time.Duration // validity is cut short by this much

	mu        sync.Mutex             // guards the fields below
	held      map[string]*holding    // by lease name
	observed  map[string]observation // by lease name: when each lease's current version was first seen
	draining  bool
	lastErr   error     // the last renewal error, for readyz
	memberAt  time.Time // when the member lease was last renewed (local clock)
	started   bool
	memberRV  *coordv1.Lease
	renewDone chan struct{}
}

// holding is one lease this replica holds.
type holding struct {
	key        Key
	lease      *coordv1.Lease // as last written by us
	epoch      int64
	validUntil time.Time // local clock: last renewal's start + duration - margin
	inflight   int
	// releasing: the hand-off is announced (peers hold new requests);
	// calls that reach this replica are still served. closing: the last
	// calls are being waited for; nothing new is served here.
	releasing bool
	closing   bool
	idle      chan struct{} // closed when inflight reaches 0 while closing
}

type observation struct {
	rv string
	at time.Time
}

// NewOwners returns an Owners over cs; call Start.
func NewOwners(cs kubernetes.Interface, o Options) *Owners {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Wall == nil {
		o.Wall = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Owners{
		o:        o,
		cs:       cs,
		margin:   o.LeaseDuration / 6,
		held:     map[string]*holding{},
		observed: map[string]observation{},
	}
}

// Start starts the informer on the deployment's leases, waits for its
// first listing (bounded by ctx), writes the member lease and starts the
// renewer. Everything stops when ctx ends.
func (w *Owners) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(w.cs, 0, informers.WithNamespace(w.o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = LabelDeployment + "=" + w.o.Deployment }))
	inf := f.Coordination().V1().Leases()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj) },
		UpdateFunc: func(_, obj any) { w.observe(obj) },
		DeleteFunc: func(obj any) {
			if l, ok := obj.(*coordv1.Lease); ok {
				w.mu.Lock()
				delete(w.observed, l.Name)
				w.mu.Unlock()
			}
		},
	}); err != nil {
		return fmt.Errorf("cannot watch leases: %w", err)
	}
	w.leases = inf.Lister().Leases(w.o.Namespace)
	w.synced = inf.Informer().HasSynced
	f.Start(ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), w.synced) {
		return fmt.Errorf("the leases in namespace %s could not be listed within 30s; check sandboxd's RBAC (leases in coordination.k8s.io) and the API server", w.o.Namespace)
	}
	if err := w.renewMember(ctx); err != nil {
		return fmt.Errorf("this replica's lease %s cannot be written: %w", MemberLeaseName(w.o.Deployment, w.o.Self.Identity), err)
	}
	w.mu.Lock()
	w.started = true
	w.renewDone = make(chan struct{})
	w.mu.Unlock()
	go w.renewer(ctx)
	return nil
}

// observe notes when a lease's version was first seen: the basis of
// expiry that no wall clock can fool.
func (w *Owners) observe(obj any) {
	l, ok := obj.(*coordv1.Lease)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ob, ok := w.observed[l.Name]; !ok || ob.rv != l.ResourceVersion {
		w.observed[l.Name] = observation{rv: l.ResourceVersion, at: w.o.Now()}
	}
}

// Route says how a request for a conversation is served.
type Route struct {
	// Local: this replica owns the conversation; call Done when the
	// request is finished.
	Local bool
	Epoch int64
	// Peer owns it when !Local.
	Peer Peer
	done func()
}

// Done ends a local request's hold on the lease.
func (r Route) Done() {
	if r.done != nil {
		r.done()
	}
}

// Resolve finds who serves k now: this replica when it holds a valid lease
// or can take a free or expired one (unless mayTake is false or it is
// draining), else the holder. A conversation changing hands is
// errdefs.Unavailable, with the wait in RetryAfter.
func (w *Owners) Resolve(ctx context.Context, k Key, mayTake bool) (Route, error) {
	name := LeaseName(w.o.Deployment, k)
	live := false // after a lost race the cache is behind: ask the API server
	for attempt := 0; attempt < 4; attempt++ {
		if r, ok := w.local(name); ok {
			return r, nil
		}
		l, err := w.read(ctx, name, live)
		if err != nil {
			return Route{}, err
		}
		if l != nil {
			holder, url := holderOf(l)
			if holder != "" && holder != w.o.Self.Identity && !w.expired(l) {
				if l.Annotations[AnnotationReleasing] == "true" && mayTake && !w.isDraining() {
					// Its owner is handing it over: wait for the release
					// rather than send the call to a replica on its way out.
					if err := w.awaitRelease(ctx, name, holder); err != nil {
						return Route{}, retryLater(time.Second, "conversation %s is being handed over by replica %s; retry", k, holder)
					}
					continue
				}
				if url == "" {
					return Route{}, retryLater(w.remaining(l), "conversation %s is owned by replica %s, which has not said where it is reached; retry", k, holder)
				}
				return Route{Peer: Peer{Identity: holder, URL: url}}, nil
			}
		}
		if !mayTake {
			return Route{}, retryLater(time.Second, "conversation %s is changing hands; retry", k)
		}
		if w.isDraining() {
			// Shutting down: a live peer takes it over.
			if p, ok := w.otherPeer(); ok {
				return Route{Peer: p}, nil
			}
			return Route{}, errDraining
		}
		err = w.take(ctx, k, name, l)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			live = true // another replica moved first: look again
			continue
		}
		if err != nil {
			return Route{}, errdefs.Unavailable("the lease of conversation %s cannot be taken: %v; retry", k, err)
		}
	}
	return Route{}, retryLater(time.Second, "conversation %s is being taken over by another replica; retry", k)
}

// releaseWait bounds how long a request waits for a conversation whose
// owner announced its hand-off; the owner waits for its calls for at most
// its drain timeout, and the client's retry covers the rest.
const releaseWait = 10 * time.Second

// awaitRelease waits until name's lease is no longer held by holder with
// the hand-off announced (released, taken, or expired), polling the
// informer's cache.
func (w *Owners) awaitRelease(ctx context.Context, name, holder string) error {
	ctx, cancel := context.WithTimeout(ctx, releaseWait)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		l, err := w.leases.Get(name)
		if err != nil {
			return nil
		}
		if h, _ := holderOf(l); h != holder || l.Annotations[AnnotationReleasing] != "true" || w.expired(l) {
			return nil
		}
	}
}

// otherPeer picks a live replica other than this one.
func (w *Owners) otherPeer() (Peer, bool) {
	for _, p := range w.Peers() {
		if p.Identity != w.o.Self.Identity {
			return p, true
		}
	}
	return Peer{}, false
}

// local returns a route when this replica holds name's lease and may act.
func (w *Owners) local(name string) (Route, bool) {
	w.mu.Lock()
	h := w.held[name]
	if h == nil || h.closing {
		w.mu.Unlock()
		return Route{}, false
	}
	if w.o.Now().After(h.validUntil) {
		tell := w.dropLocked(name, h, "lost", "its lease was not renewed in time")
		w.mu.Unlock()
		tell()
		return Route{}, false
	}
	h.inflight++
	w.mu.Unlock()
	return Route{Local: true, Epoch: h.epoch, done: func() { w.leave(name, h) }}, true
}

func (w *Owners) leave(name string, h *holding) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h.inflight--
	if h.inflight == 0 && h.idle != nil {
		close(h.idle)
		h.idle = nil
	}
}

// read returns name's lease from the informer's cache (unless live),
// asking the API server when the cache has none (nil when there is none
// at all).
func (w *Owners) read(ctx context.Context, name string, live bool) (*coordv1.Lease, error) {
	if l, err := w.leases.Get(name); err == nil && !live {
		return l, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	l, err := w.cs.CoordinationV1().Leases(w.o.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errdefs.Unavailable("the lease %s cannot be read from the API server: %v; retry", name, err)
	}
	w.observe(l)
	return l, nil
}

func holderOf(l *coordv1.Lease) (holder, url string) {
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return holder, l.Annotations[AnnotationPeerURL]
}

// expired reports whether another replica's lease may be taken.
func (w *Owners) expired(l *coordv1.Lease) bool {
	d := leaseDuration(l, w.o.LeaseDuration)
	if l.Spec.RenewTime != nil && w.o.Wall().Sub(l.Spec.RenewTime.Time) > d+skewAllowance {
		return true
	}
	w.mu.Lock()
	ob, ok := w.observed[l.Name]
	w.mu.Unlock()
	if !ok || ob.rv != l.ResourceVersion {
		return false // not seen long enough to tell
	}
	return w.o.Now().Sub(ob.at) > d
}

// remaining is how long until another replica's lease may be taken.
func (w *Owners) remaining(l *coordv1.Lease) time.Duration {
	d := leaseDuration(l, w.o.LeaseDuration)
	w.mu.Lock()
	ob, ok := w.observed[l.Name]
	w.mu.Unlock()
	if !ok {
		return d
	}
	return max(time.Second, d-w.o.Now().Sub(ob.at))
}

func leaseDuration(l *coordv1.Lease, def time.Duration) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return def
}

// take writes this replica into k's lease (creating it when there is
// none), naming the version read so that of two replicas only one wins,
// and bumps the epoch.
func (w *Owners) take(ctx context.Context, k Key, name string, cur *coordv1.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	start := w.o.Now()
	now := metav1.NewMicroTime(w.o.Wall())
	secs := int32((w.o.LeaseDuration + time.Second - 1) / time.Second)
	self := w.o.Self.Identity
	var l *coordv1.Lease
	var err error
	if cur == nil {
		one := int32(1)
		l, err = w.cs.CoordinationV1().Leases(w.o.Namespace).Create(ctx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      map[string]string{LabelDeployment: w.o.Deployment, LabelKind: KindConversation},
				Annotations: map[string]string{AnnotationPeerURL: w.o.Self.URL, AnnotationTenant: k.Tenant, AnnotationConversation: k.Conversation},
			},
			Spec: coordv1.LeaseSpec{HolderIdentity: &self, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now, LeaseTransitions: &one},
		}, metav1.CreateOptions{})
	} else {
		next := cur.DeepCopy()
		tr := int32(1)
		if next.Spec.LeaseTransitions != nil {
			tr = *next.Spec.LeaseTransitions + 1
		}
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[AnnotationPeerURL] = w.o.Self.URL
		next.Annotations[AnnotationTenant] = k.Tenant
		next.Annotations[AnnotationConversation] = k.Conversation
		delete(next.Annotations, AnnotationReleasing)
		next.Spec.HolderIdentity, next.Spec.LeaseDurationSeconds = &self, &secs
		next.Spec.AcquireTime, next.Spec.RenewTime, next.Spec.LeaseTransitions = &now, &now, &tr
		l, err = w.cs.CoordinationV1().Leases(w.o.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	epoch := int64(*l.Spec.LeaseTransitions)
	w.mu.Lock()
	if w.draining {
		w.mu.Unlock()
		w.release(name, l)
		return errDraining
	}
	w.held[name] = &holding{key: k, lease: l, epoch: epoch, validUntil: start.Add(w.o.LeaseDuration - w.margin)}
	w.mu.Unlock()
	w.o.Metrics.handover("taken")
	w.o.Log.Info("conversation taken", "conversation", k.String(), "epoch", epoch, "lease", name)
	if w.o.Hooks.Taken != nil {
		w.o.Hooks.Taken(ctx, k, epoch)
	}
	return nil
}

// Epoch returns the fencing epoch of k's lease while this replica holds it
// validly; the agent pipe claims it.
func (w *Owners) Epoch(k Key) (int64, error) {
	name := LeaseName(w.o.Deployment, k)
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.held[name]
	if h == nil || h.closing || w.o.Now().After(h.validUntil) {
		return 0, errdefs.Unavailable("this replica no longer owns conversation %s; retry, its new owner will serve it", k)
	}
	return h.epoch, nil
}

// HeldBy reports whether identity still holds k's lease as this replica
// sees it: named in it and not expired. A forward to a holder that stops
// responding is given up once this turns false.
func (w *Owners) HeldBy(k Key, identity string) bool {
	l, err := w.leases.Get(LeaseName(w.o.Deployment, k))
	if err != nil {
		return false
	}
	holder, _ := holderOf(l)
	return holder == identity && !w.expired(l)
}

// Owned returns how many conversation leases this replica holds.
func (w *Owners) Owned() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

func (w *Owners) isDraining() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.draining
}

// dropLocked forgets a held lease; direction is the metric's ("lost" or
// "released"). The returned func tells the hooks and must be called after
// the lock is released: Epoch is called from the dials the hook cuts.
func (w *Owners) dropLocked(name string, h *holding, direction, why string) func() {
	if w.held[name] != h {
		return func() {}
	}
	delete(w.held, name)
	w.o.Metrics.handover(direction)
	return func() {
		w.o.Log.Warn("conversation no longer owned", "conversation", h.key.String(), "epoch", h.epoch, "why", why)
		if w.o.Hooks.Lost != nil {
			w.o.Hooks.Lost(h.key, why)
		}
	}
}

// release writes an empty holder into the lease, so that the next replica
// takes it at once instead of waiting for it to expire. A conflict (a
// renewal or the announcement wrote it meanwhile) is read again and
// retried while the lease is still ours.
func (w *Owners) release(name string, l *coordv1.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	leases := w.cs.CoordinationV1().Leases(w.o.Namespace)
	for try := 0; try < 3 && l != nil; try++ {
		next := l.DeepCopy()
		empty := ""
		next.Spec.HolderIdentity = &empty
		delete(next.Annotations, AnnotationPeerURL)
		delete(next.Annotations, AnnotationReleasing)
		_, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		if !apierrors.IsConflict(err) {
			w.o.Log.Warn("a lease was not released; it expires by itself", "lease", name, "err", err)
			return
		}
		if l, err = leases.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return
		}
		if holder, _ := holderOf(l); holder != w.o.Self.Identity {
			return // someone took it: nothing to release
		}
	}
}

// RetryAfterError is an errdefs.Unavailable error that says when to retry.
type RetryAfterError struct {
	After time.Duration
	err   error
}

func (e *RetryAfterError) Error() string { return e.err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.err }

func retryLater(after time.Duration, format string, args ...any) error {
	return &RetryAfterError{After: after, err: errdefs.Unavailable(format, args...)}
}

// RetryAfter returns the wait an error asks for (1s when it names none).
func RetryAfter(err error) time.Duration {
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return ra.After
	}
	return time.Second
}

// SetMetrics makes w count into m; call it before Start (the metrics read
// w's counts, so they are made after it).
func (w *Owners) SetMetrics(m *Metrics) { w.o.Metrics = m }
