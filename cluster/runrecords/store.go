package runrecords

import (
	"context"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// Defaults of a Store.
const (
	DefaultSyncTimeout = 30 * time.Second // Start waits this long for the first list
	DefaultCallTimeout = 5 * time.Second  // each call to the API server at most
)

// Bounds of the names this store deleted and whose delete event has not
// reached its cache yet.
const (
	maxGone    = 4096
	goneLinger = time.Minute
)

// Store keeps run records as ConfigMaps and serves List, Count and most of
// Get from an informer's cache. It is safe for concurrent use.
//
// Goroutines: Start starts the informer's (its reflector and its event
// processor) and one that waits for Start's ctx to end and then shuts the
// informer down. Nothing runs before Start; after Start's ctx is done, the
// cache no longer follows the cluster, while Put, Remove and Get still
// call the API server.
type Store struct {
	cs          kubernetes.Interface
	namespace   string
	deployment  string
	log         *slog.Logger
	syncTimeout time.Duration
	callTimeout time.Duration
	now         func() time.Time

	startMu sync.Mutex // guards started
	started bool

	mu       sync.RWMutex                   // guards byName, byTenant, gone, bad
	byName   map[string]tools.Run           // the cache: record name → its run
	byTenant map[string]map[string]struct{} // the index: tenant hash → record names
	gone     map[string]time.Time           // names deleted here, until their delete event (or goneLinger)
	bad      map[string]string              // undecodable record name → resource version logged
}

// Option configures a Store.
type Option func(*Store)

// WithLogger sets where skipped records and cache problems are logged.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithSyncTimeout bounds Start's wait for the first list; <= 0 keeps the
// default.
func WithSyncTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.syncTimeout = d
		}
	}
}

// WithCallTimeout bounds each call to the API server; <= 0 keeps the
// default.
func WithCallTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.callTimeout = d
		}
	}
}

// New returns a Store of deployment's run records in namespace. Start it
// to fill its cache.
func New(cs kubernetes.Interface, namespace, deployment string, opts ...Option) *Store {
	s := &Store{
		cs: cs, namespace: namespace, deployment: deployment,
		log:         slog.New(slog.DiscardHandler),
		syncTimeout: DefaultSyncTimeout,
		callTimeout: DefaultCallTimeout,
		now:         time.Now,
		byName:      map[string]tools.Run{},
		byTenant:    map[string]map[string]struct{}{},
		gone:        map[string]time.Time{},
		bad:         map[string]string{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Put stores run, a top-level run, creating its record or replacing it.
func (s *Store) Put(ctx context.Context, run tools.Run) error {
	name := recordName(s.deployment, run.ID)
	switch {
	case name == "":
		return errdefs.InvalidArgument("run id %q cannot name a record; run ids are %q and a UUID", run.ID, runIDPrefix)
	case run.Tenant == "":
		return errdefs.InvalidArgument("run %s has no tenant; every recorded run belongs to one", run.ID)
	case run.Parent != "":
		return errdefs.InvalidArgument("run %s is a child run; only top-level runs are recorded", run.ID)
	}
	cm, err := encode(s.namespace, s.deployment, run)
	if err != nil {
		return errdefs.Internal("run %s cannot be encoded: %w", run.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	cms := s.cs.CoreV1().ConfigMaps(s.namespace)
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return s.callErr("written", name, err)
	}
	s.mu.Lock()
	delete(s.gone, name)
	s.setLocked(name, run)
	s.mu.Unlock()
	return nil
}

// Remove deletes the record of id; a record that is not there is no error.
func (s *Store) Remove(ctx context.Context, id string) error {
	name := recordName(s.deployment, id)
	if name == "" {
		return nil // no record can have that name
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	err := s.cs.CoreV1().ConfigMaps(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return s.callErr("deleted", name, err)
	}
	now := s.now()
	s.mu.Lock()
	s.unsetLocked(name)
	s.buryLocked(name, now)
	s.mu.Unlock()
	return nil
}

// Get returns the run of id from the cache or, when the cache does not
// hold it (a run created a moment ago by another replica), from the API
// server. A record that does not decode is logged and not found.
func (s *Store) Get(ctx context.Context, id string) (tools.Run, bool, error) {
	name := recordName(s.deployment, id)
	if name == "" {
		return tools.Run{}, false, nil
	}
	s.mu.RLock()
	run, cached := s.byName[name]
	_, gone := s.gone[name]
	s.mu.RUnlock()
	if cached || gone {
		return run, cached, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	cm, err := s.cs.CoreV1().ConfigMaps(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return tools.Run{}, false, nil
	}
	if err != nil {
		return tools.Run{}, false, s.callErr("read", name, err)
	}
	run, err = decode(s.deployment, cm)
	if err != nil {
		s.skipped(cm.Name, cm.ResourceVersion, err)
		return tools.Run{}, false, nil
	}
	return run, true, nil
}

// List returns the tenant's runs in the cache.
func (s *Store) List(tenant string) []tools.Run {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []tools.Run
	for name := range s.byTenant[TenantHash(tenant)] {
		if r := s.byName[name]; r.Tenant == tenant {
			out = append(out, r)
		}
	}
	return out
}

// Count returns the number of the tenant's runs in the cache.
func (s *Store) Count(tenant string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for name := range s.byTenant[TenantHash(tenant)] {
		if s.byName[name].Tenant == tenant {
			n++
		}
	}
	return n
}

// callErr says which call failed and what to check.
func (s *Store) callErr(what, name string, err error) error {
	if apierrors.IsForbidden(err) {
		return errdefs.FailedPrecondition("run record %s/%s cannot be %s: %w; the Role of sandboxd's service account must allow get, list, watch, create, update and delete on configmaps",
			s.namespace, name, what, err)
	}
	return errdefs.Unavailable("run record %s/%s cannot be %s: %w", s.namespace, name, what, err)
}

// skipped logs an undecodable record once per version of it.
func (s *Store) skipped(name, version string, err error) {
	s.mu.Lock()
	v, ok := s.bad[name]
	seen := ok && v == version
	s.bad[name] = version
	s.mu.Unlock()
	if !seen {
		s.log.Warn("a run record is skipped: it is not a run this sandboxd wrote; delete it or fix it",
			"namespace", s.namespace, "configmap", name, "resourceVersion", version, "err", err)
	}
}
