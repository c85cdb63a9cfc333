package runrecords

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Start starts the informer on the deployment's run records and waits,
// for the sync timeout at most, until the cache holds every record. The
// informer runs until ctx is done. A Store is started once.
func (s *Store) Start(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.started {
		return errdefs.FailedPrecondition("the run records of %s are already started; start a Store once", s.deployment)
	}
	s.started = true
	factory := informers.NewSharedInformerFactoryWithOptions(s.cs, 0,
		informers.WithNamespace(s.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector(s.deployment) }))
	inf := factory.Core().V1().ConfigMaps().Informer()
	reg, err := inf.AddEventHandler(handler{s})
	if err != nil {
		return errdefs.Internal("the run records' informer cannot take a handler: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	factory.StartWithContext(runCtx)
	go func() {
		<-runCtx.Done()
		stop()
		factory.Shutdown() // waits for the informer's goroutines
	}()
	syncCtx, cancel := context.WithTimeout(runCtx, s.syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced) {
		stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errdefs.Unavailable("the run records in namespace %s were not listed within %s; check that the API server is reachable and that sandboxd may list and watch configmaps there",
			s.namespace, s.syncTimeout)
	}
	return nil
}

// handler applies the informer's events to the cache.
type handler struct{ s *Store }

func (h handler) OnAdd(obj any, _ bool) { h.s.observe(obj) }

func (h handler) OnUpdate(_, obj any) { h.s.observe(obj) }

func (h handler) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	s := h.s
	s.mu.Lock()
	s.unsetLocked(cm.Name)
	delete(s.gone, cm.Name)
	delete(s.bad, cm.Name)
	s.mu.Unlock()
}

// observe caches a record the informer saw, unless it was deleted here
// (the event is older than the delete) or it does not decode.
func (s *Store) observe(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	run, err := decode(s.deployment, cm)
	if err != nil {
		s.mu.Lock()
		s.unsetLocked(cm.Name)
		s.mu.Unlock()
		s.skipped(cm.Name, cm.ResourceVersion, err)
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.gone[cm.Name]; ok && now.Sub(at) < goneLinger {
		return
	}
	delete(s.gone, cm.Name)
	delete(s.bad, cm.Name)
	s.setLocked(cm.Name, run)
}

// setLocked caches run under name and indexes it by tenant hash.
func (s *Store) setLocked(name string, run tools.Run) {
	s.unsetLocked(name)
	s.byName[name] = run
	h := TenantHash(run.Tenant)
	if s.byTenant[h] == nil {
		s.byTenant[h] = map[string]struct{}{}
	}
	s.byTenant[h][name] = struct{}{}
}

// unsetLocked drops name from the cache and the index.
func (s *Store) unsetLocked(name string) {
	run, ok := s.byName[name]
	if !ok {
		return
	}
	delete(s.byName, name)
	h := TenantHash(run.Tenant)
	delete(s.byTenant[h], name)
	if len(s.byTenant[h]) == 0 {
		delete(s.byTenant, h)
	}
}

// buryLocked remembers that name was deleted here, so that an older event
// of it does not bring it back; entries go on its delete event or after
// goneLinger, and there are at most maxGone.
func (s *Store) buryLocked(name string, now time.Time) {
	for n, at := range s.gone {
		if now.Sub(at) >= goneLinger || len(s.gone) >= maxGone {
			delete(s.gone, n)
		}
	}
	s.gone[name] = now
}
