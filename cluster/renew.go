package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// renewParallel bounds the renewals in flight at once.
const renewParallel = 8

// renewer renews every held lease and the member lease each interval
// until ctx ends.
func (w *Owners) renewer(ctx context.Context) {
	defer close(w.renewDone)
	t := time.NewTicker(w.o.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.renewAll(ctx)
		if err := w.renewMember(ctx); err != nil {
			w.noteErr(fmt.Errorf("this replica's lease: %w", err))
		}
	}
}

func (w *Owners) renewAll(ctx context.Context) {
	w.mu.Lock()
	names := make([]string, 0, len(w.held))
	for n := range w.held {
		names = append(names, n)
	}
	w.mu.Unlock()
	w.each(len(names), func(i int) { w.renewOne(ctx, names[i]) })
}

// renewOne renews one held lease. A lease another replica took (the
// update conflicts and the holder changed) or that vanished is lost at
// once; one that cannot be written for another reason stays held until its
// validity runs out, then it is lost too.
func (w *Owners) renewOne(ctx context.Context, name string) {
	w.mu.Lock()
	h := w.held[name]
	if h == nil {
		w.mu.Unlock()
		return
	}
	cur := h.lease
	w.mu.Unlock()

	start := w.o.Now()
	next := cur.DeepCopy()
	now := metav1.NewMicroTime(w.o.Wall())
	next.Spec.RenewTime = &now
	cctx, cancel := context.WithTimeout(ctx, w.o.RenewInterval)
	l, err := w.cs.CoordinationV1().Leases(w.o.Namespace).Update(cctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Someone wrote it: still ours only if holder and epoch are.
		var live *coordv1.Lease
		if live, err = w.cs.CoordinationV1().Leases(w.o.Namespace).Get(cctx, name, metav1.GetOptions{}); err == nil {
			if holder, _ := holderOf(live); holder != w.o.Self.Identity || live.Spec.LeaseTransitions == nil || int64(*live.Spec.LeaseTransitions) != h.epoch {
				cancel()
				w.lose(name, h, fmt.Sprintf("replica %q took its lease", holder))
				return
			}
			live.Spec.RenewTime = &now
			l, err = w.cs.CoordinationV1().Leases(w.o.Namespace).Update(cctx, live, metav1.UpdateOptions{})
		}
	}
	cancel()
	if apierrors.IsNotFound(err) {
		w.lose(name, h, "its lease was deleted")
		return
	}
	if err != nil {
		w.o.Metrics.renewFailed()
		w.noteErr(fmt.Errorf("lease %s: %w", name, err))
		w.mu.Lock()
		expired := w.held[name] == h && w.o.Now().After(h.validUntil)
		w.mu.Unlock()
		if expired {
			w.lose(name, h, "its lease could not be renewed: "+err.Error())
		}
		return
	}
	w.mu.Lock()
	if w.held[name] == h {
		h.lease = l
		h.validUntil = start.Add(w.o.LeaseDuration - w.margin)
	}
	w.lastErr = nil
	w.mu.Unlock()
}

func (w *Owners) lose(name string, h *holding, why string) {
	w.mu.Lock()
	tell := w.dropLocked(name, h, "lost", why)
	w.mu.Unlock()
	tell()
}

func (w *Owners) noteErr(err error) {
	w.mu.Lock()
	w.lastErr = err
	w.mu.Unlock()
	w.o.Log.Warn("lease renewal failed", "err", err)
}

// renewMember writes this replica's own lease: that it lives and where it
// is reached.
func (w *Owners) renewMember(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(w.o.RenewInterval, time.Second))
	defer cancel()
	start := w.o.Now()
	name := MemberLeaseName(w.o.Deployment, w.o.Self.Identity)
	self := w.o.Self.Identity
	secs := int32((w.o.LeaseDuration + time.Second - 1) / time.Second)
	now := metav1.NewMicroTime(w.o.Wall())
	leases := w.cs.CoordinationV1().Leases(w.o.Namespace)
	w.mu.Lock()
	cur := w.memberRV
	w.mu.Unlock()
	var l *coordv1.Lease
	var err error
	if cur == nil {
		cur, err = leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l, err = leases.Create(ctx, &coordv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name,
					Labels:      map[string]string{LabelDeployment: w.o.Deployment, LabelKind: KindReplica},
					Annotations: map[string]string{AnnotationPeerURL: w.o.Self.URL}},
				Spec: coordv1.LeaseSpec{HolderIdentity: &self, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{})
			cur = nil
		}
	}
	if err == nil && cur != nil {
		next := cur.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[AnnotationPeerURL] = w.o.Self.URL
		next.Spec.HolderIdentity, next.Spec.LeaseDurationSeconds, next.Spec.RenewTime = &self, &secs, &now
		l, err = leases.Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			w.mu.Lock()
			w.memberRV = nil // read it again next time
			w.mu.Unlock()
		}
	}
	if err != nil {
		w.o.Metrics.renewFailed()
		return err
	}
	w.mu.Lock()
	w.memberRV, w.memberAt = l, start
	w.mu.Unlock()
	return nil
}

// Peers returns the live replicas of the deployment (this one included),
// from their member leases, sorted by identity.
func (w *Owners) Peers() []Peer {
	if w.leases == nil {
		return nil
	}
	ls, err := w.leases.List(kindSelector(KindReplica))
	if err != nil {
		return nil
	}
	var out []Peer
	for _, l := range ls {
		holder, url := holderOf(l)
		if holder == "" || url == "" || (holder != w.o.Self.Identity && w.expired(l)) {
			continue
		}
		out = append(out, Peer{Identity: holder, URL: url})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Identity < out[j].Identity })
	return out
}

// Ready reports whether this replica can serve: its member lease was
// renewed within the lease duration and it is not draining.
func (w *Owners) Ready() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.started:
		return errors.New("the replica has not joined the deployment yet")
	case w.draining:
		return errors.New("the replica is shutting down and hands its conversations over")
	case w.o.Now().Sub(w.memberAt) > w.o.LeaseDuration-w.margin:
		why := "no renewal succeeded"
		if w.lastErr != nil {
			why = w.lastErr.Error()
		}
		return fmt.Errorf("the replica cannot renew its leases in the API server (%s); it owns no conversation until it can", why)
	}
	return nil
}

// announceGrace is how long a draining replica keeps serving after it
// announced its hand-off, so that the peers' informers see the
// announcement and hold new requests instead of sending them here.
const announceGrace = 300 * time.Millisecond

// Drain is the graceful hand-off: from now on no lease is taken; each held
// lease is marked as being handed over (peers then hold new requests for
// it instead of forwarding them here), calls already here are served and
// waited for (until ctx ends), the pipe is detached (the Lost hook), and
// the lease is released so that the next request, at any replica, takes
// it at once. Last the member lease is deleted.
func (w *Owners) Drain(ctx context.Context) {
	w.mu.Lock()
	w.draining = true
	type rel struct {
		name string
		h    *holding
	}
	var rels []rel
	for n, h := range w.held {
		h.releasing = true
		rels = append(rels, rel{n, h})
	}
	w.mu.Unlock()

	w.each(len(rels), func(i int) { w.announce(rels[i].name, rels[i].h) })
	select {
	case <-time.After(announceGrace):
	case <-ctx.Done():
	}
	w.each(len(rels), func(i int) {
		r := rels[i]
		w.mu.Lock()
		r.h.closing = true
		var idle chan struct{}
		if r.h.inflight > 0 {
			idle = make(chan struct{})
			r.h.idle = idle
		}
		w.mu.Unlock()
		if idle != nil {
			select {
			case <-idle:
			case <-ctx.Done():
				w.o.Log.Warn("calls still running at the hand-off deadline are cut off", "conversation", r.h.key.String())
			}
		}
		w.mu.Lock()
		tell := w.dropLocked(r.name, r.h, "released", "this replica is shutting down")
		l := r.h.lease
		w.mu.Unlock()
		tell()
		w.release(r.name, l)
	})
	dctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if err := w.cs.CoordinationV1().Leases(w.o.Namespace).Delete(dctx, MemberLeaseName(w.o.Deployment, w.o.Self.Identity), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		w.o.Log.Warn("this replica's lease was not deleted; it expires by itself", "err", err)
	}
	w.o.Log.Info("conversations handed over", "count", len(rels))
}

// each runs f(0..n-1) with at most renewParallel at once.
func (w *Owners) each(n int, f func(i int)) {
	sem := make(chan struct{}, renewParallel)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// announce marks a held lease as being handed over.
func (w *Owners) announce(name string, h *holding) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	leases := w.cs.CoordinationV1().Leases(w.o.Namespace)
	w.mu.Lock()
	cur := h.lease
	w.mu.Unlock()
	for try := 0; try < 3; try++ {
		next := cur.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[AnnotationReleasing] = "true"
		l, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			w.mu.Lock()
			h.lease = l
			w.mu.Unlock()
			return
		}
		if !apierrors.IsConflict(err) {
			w.o.Log.Warn("a hand-off was not announced; peers may send calls here until the release", "lease", name, "err", err)
			return
		}
		if cur, err = leases.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return
		}
		if holder, _ := holderOf(cur); holder != w.o.Self.Identity {
			return
		}
	}
}
