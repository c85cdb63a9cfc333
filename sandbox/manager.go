package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Manager maps (tenant, conversation) to sandboxes and keeps one agent pipe
// per sandbox. The backend's labels are the source of truth; the Manager
// only caches them, refreshes the cache on a miss and periodically, and so
// notices sandboxes created or removed behind its back. It works for its
// backend's Deployment alone: a sandbox the deployment does not own is
// skipped in every listing and NotFound everywhere else, even when the
// backend lets it through, so it is never adopted, counted, reaped or
// deleted, and a conversation id is unique per deployment and tenant.
//
// The engine's state is read before a pipe is opened, again when opening
// fails, and before an open pipe is handed out once the last reading is
// older than the state-check interval: a paused, stopped or vanished
// sandbox is reported as such instead of as a dropped session.
//
// With warm pools (WithPools), Create for a pooled image claims a sandbox
// that was made, started and attached ahead of time (poolclaim.go).
//
// Goroutines: one reaper (periodic refresh and idle reaping; it asks the
// reap gate), one dialer per pipe being opened (it runs the attach hook),
// one watcher per open pipe, and per pool one refiller with at most
// poolConcurrency warm-ups, started after one sweep of leftovers, and one
// removal per discarded pool sandbox. Close stops the reaper and the
// refillers, cancels dials and warm-ups, closes every pipe (processes in
// the sandboxes keep running; unclaimed pool sandboxes stay until the next
// start removes them) and waits for all of them.
type Manager struct {
	backend Backend
	name    string
	dep     Deployment // the backend's: every sandbox outside it is ignored
	opts    options
	log     *slog.Logger
	pools   map[string]*pool // by image; fixed at NewManager

	ctx    context.Context // cancelled by Close; parent of dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // reaper, dialers, watchers

	keep      atomic.Pointer[func(Info) bool] // which sandboxes get a pipe kept open (keep.go)
	convLocks keyLocks                        // per (tenant, conversation): serializes Create, Delete and reaping of one conversation
	refreshMu sync.Mutex                      // serializes refreshes, so that tombstones can be pruned after one

	mu          sync.Mutex        // guards the fields below and every entry's fields
	byID        map[string]*entry // the cache
	tombstones  map[string]uint64 // id -> gen at removal; keeps a stale listing from resurrecting it
	gen         uint64            // bumped on every insert and removal
	lastListAt  time.Time         // when the last successful List started
	reconnects  uint64
	started     bool
	closed      bool
	refreshFail bool // the last periodic refresh failed (log only transitions)
}

// entry is one cached sandbox.
type entry struct {
	info     Info
	gen      uint64 // m.gen at insert: a refresh that listed before it must not drop it
	lastUsed time.Time
	// since is when a transition made here put the sandbox in sinceState
	// (the engine keeps no time for some, e.g. a Docker pause).
	since      time.Time
	sinceState string
	// checked is when the engine last said the sandbox runs (real time):
	// a pipe handed out after stateCheck without one is checked first, so
	// a paused or stopped sandbox fails fast instead of hanging the call.
	checked time.Time
	client  *agent.Client
	// clientStarted is the sandbox's Info.Started read as client was
	// opened: a later start means the sandbox restarted under the pipe.
	clientStarted time.Time
	dial          *dialing // non-nil while a pipe is being opened
	opened        bool     // a pipe was opened before, so the next one is a reconnect
	removing      bool
	// lifecycle is info's own lifecycle label, parsed by setInfo from the
	// text in lifecycleRaw (lifecycleErr says why it did not parse), so the
	// reaper's pass every 500 ms reads it without parsing JSON. Like every
	// entry field it is guarded by Manager.mu, and setInfo keeps the three
	// in step with info.
	lifecycleRaw string
	lifecycle    Lifecycle
	lifecycleErr error
	// expiry is info's LabelExpiry, parsed by setInfo as the lifecycle is
	// (zero when absent or bad); expiryWritten is when this manager last
	// wrote it, so a listing from before keeps it; expiryRetry is when a
	// step the engine refused is tried again.
	expiryRaw     string
	expiry        Expiry
	expiryWritten time.Time
	expiryRetry   time.Time
}

// setInfo replaces e's info and parses its lifecycle label when the
// label's text is not the one parsed before (a refresh brings the same
// label again). The caller holds Manager.mu.
func (e *entry) setInfo(info Info) {
	e.info = info
	if raw := info.Labels[LabelExpiry]; raw != e.expiryRaw {
		e.expiryRaw = raw
		e.expiry, _, _ = ExpiryOf(info) // a bad label is as none
		if e.expiry.check() != nil {
			e.expiry = Expiry{}
		}
	}
	raw, ok := info.Labels[LabelLifecycle]
	if !ok {
		e.lifecycleRaw, e.lifecycle, e.lifecycleErr = "", Lifecycle{}, nil
		return
	}
	if raw != "" && raw == e.lifecycleRaw {
		return
	}
	e.lifecycleRaw = raw
	e.lifecycle, e.lifecycleErr = LifecycleOf(info)
}

// dialing is one pipe being opened; waiters read err after done is closed.
type dialing struct {
	done chan struct{}
	err  error
	// detached is set (under Manager.mu) by a Detach while the pipe was
	// being opened: the dialer closes it instead of publishing it.
	detached bool
}

// NewManager returns a Manager over b. Call Start before use and Close at the end.
func NewManager(b Backend, opts ...Option) *Manager {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pools := make(map[string]*pool, len(o.pools))
	for _, ps := range o.pools {
		pools[ps.Image] = newPool(ps)
	}
	return &Manager{
		pools:      pools,
		backend:    b,
		name:       b.Name(),
		dep:        b.Deployment(),
		opts:       o,
		log:        o.log.With("backend", b.Name()),
		ctx:        ctx,
		cancel:     cancel,
		byID:       make(map[string]*entry),
		tombstones: make(map[string]uint64),
	}
}

// Backend names the backend, e.g. for metric labels.
func (m *Manager) Backend() string { return m.name }

// Start loads the map from the backend and starts the reaper. An engine that
// cannot be reached now is logged and not an error: the map is loaded on the
// first call that needs it once the engine is back.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return errdefs.FailedPrecondition("the sandbox manager was already started or closed; create a new one")
	}
	m.started = true
	m.mu.Unlock()
	if _, ok := m.backend.(Claimer); len(m.pools) > 0 && !ok {
		return errdefs.FailedPrecondition("the %s backend has no warm pools; remove pools: from the configuration, or use the docker or kubernetes backend", m.name)
	}

	err := m.refresh(ctx, time.Time{})
	switch {
	case err == nil:
		m.mu.Lock()
		n := len(m.byID)
		m.mu.Unlock()
		m.log.Info("sandbox map loaded", "sandboxes", n, "deployment", m.dep.Name, "adopt_unlabelled", m.dep.AdoptUnlabelled)
	case errors.Is(err, errdefs.ErrUnavailable):
		m.log.Warn("sandbox map not loaded yet; will retry", "err", err)
	default:
		return err
	}
	m.noteUnlabelled(ctx)
	m.wg.Add(1)
	go m.reaper()
	if _, ok := m.backend.(Claimer); ok {
		m.wg.Add(1)
		go m.startPools()
	}
	return nil
}

// noteUnlabelled warns about sandboxes of a sandboxd from before
// deployments that this deployment leaves alone: after an upgrade they would
// otherwise vanish from the API without a word while they keep running.
func (m *Manager) noteUnlabelled(ctx context.Context) {
	c, ok := m.backend.(UnlabelledCounter)
	if !ok || m.dep.AdoptUnlabelled {
		return
	}
	n, err := c.Unlabelled(ctx)
	if err != nil || n == 0 {
		return
	}
	m.log.Warn("sandboxes made before deployments carry no deployment label and are left alone; "+
		"set adopt_unlabelled_sandboxes: true in the one deployment that made them", "count", n, "deployment", m.dep.Name)
}

// Close stops the reaper and closes every agent pipe; the sandboxes and the
// processes in them keep running.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var clients []*agent.Client
	for _, e := range m.byID {
		if e.client != nil {
			clients = append(clients, e.client)
		}
	}
	m.mu.Unlock()
	m.cancel()
	for _, c := range clients {
		_ = c.Close()
	}
	m.wg.Wait()
	return nil
}

// Ping checks the engine when the backend can.
func (m *Manager) Ping(ctx context.Context) error {
	if p, ok := m.backend.(Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Create makes a sandbox for spec's conversation. A conversation has at most
// one sandbox per tenant: a second Create is a Conflict.
func (m *Manager) Create(ctx context.Context, spec Spec) (Info, error) {
	if err := validateSpec(spec); err != nil {
		return Info{}, err
	}
	if err := m.servesRuntime(spec); err != nil {
		return Info{}, err
	}
	if err := m.checkOpen(); err != nil {
		return Info{}, err
	}
	unlock, err := m.convLocks.lock(ctx, convKey(spec.Tenant, spec.Conversation))
	if err != nil {
		return Info{}, errdefs.DeadlineExceeded("waiting for another operation on conversation %s: %v; retry", spec.Conversation, err)
	}
	defer unlock()

	existing, err := m.find(ctx, spec.Tenant, spec.Conversation)
	switch {
	case err == nil:
		m.mu.Lock()
		info := existing.info
		m.mu.Unlock()
		return Info{}, errdefs.Conflict("conversation %s already has a sandbox (%s, %s); use it, or delete it before creating another",
			spec.Conversation, info.ID, info.State)
	case !errors.Is(err, errdefs.ErrNotFound):
		return Info{}, err
	}
	if spec.Snapshot != "" {
		if _, err := m.GetSnapshot(ctx, spec.Tenant, spec.Snapshot); err != nil {
			return Info{}, err
		}
	}
	if p := m.poolFor(spec); p != nil {
		if info, ok := m.claim(ctx, p, spec); ok {
			m.changed(info, ChangeCreated)
			return info, nil
		}
	}
	info, err := m.backend.Create(ctx, spec)
	if err != nil {
		return Info{}, m.backendErr("create a sandbox", err)
	}
	m.mu.Lock()
	e := m.insertLocked(info)
	e.lastUsed = m.opts.now()
	m.mu.Unlock()
	m.log.Info("sandbox created", "id", info.ID, "tenant", info.Tenant, "conversation", info.Conversation, "image", info.Image)
	m.changed(info, ChangeCreated)
	return info, nil
}

// Get returns the tenant's sandbox id with its current state; another
// tenant's sandbox is NotFound, as is one that does not exist.
func (m *Manager) Get(ctx context.Context, tenant, id string) (Info, error) {
	if id == "" {
		return Info{}, errdefs.InvalidArgument("the sandbox id is empty; list your sandboxes to see their ids")
	}
	m.mu.Lock()
	e := m.byID[id]
	foreign := e != nil && e.info.Tenant != tenant
	m.mu.Unlock()
	if foreign {
		return Info{}, errNoSandbox(id)
	}
	info, err := m.backend.Inspect(ctx, id)
	if errors.Is(err, errdefs.ErrNotFound) {
		m.forget(id, "it no longer exists in the backend")
		return Info{}, errNoSandbox(id)
	}
	if err != nil {
		return Info{}, m.backendErr("inspect sandbox "+id, err)
	}
	if !m.dep.Owns(info.Labels) {
		return Info{}, errNoSandbox(id) // another deployment's
	}
	if info.Tenant != tenant || info.Conversation == "" {
		return Info{}, errNoSandbox(id)
	}
	m.mu.Lock()
	m.insertLocked(info)
	m.mu.Unlock()
	return m.withSince(info), nil
}

// Find returns sandbox id whoever's it is, for a front end that is given
// only a sandbox (E2B's public ports): NotFound when it does not exist,
// is another deployment's or belongs to no conversation.
func (m *Manager) Find(ctx context.Context, id string) (Info, error) {
	if id == "" {
		return Info{}, errNoSandbox(id)
	}
	info, err := m.backend.Inspect(ctx, id)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return Info{}, errNoSandbox(id)
	case err != nil:
		return Info{}, m.backendErr("inspect sandbox "+id, err)
	case !m.dep.Owns(info.Labels) || info.Tenant == "" || info.Conversation == "":
		return Info{}, errNoSandbox(id)
	}
	return info, nil
}

// List returns the tenant's sandboxes, of one conversation or of all when
// conversation is "", oldest first. It always reads the backend.
func (m *Manager) List(ctx context.Context, tenant, conversation string) ([]Info, error) {
	if conversation != "" {
		if err := ValidateConversation(conversation); err != nil {
			return nil, err
		}
	}
	if err := m.refresh(ctx, time.Now()); err != nil {
		return nil, err
	}
	m.mu.Lock()
	var out []Info
	for _, e := range m.byID {
		if e.info.Tenant == tenant && (conversation == "" || e.info.Conversation == conversation) && !e.removing {
			info := e.info
			if info.StateSince.IsZero() && info.State == e.sinceState {
				info.StateSince = e.since
			}
			out = append(out, info)
		}
	}
	m.mu.Unlock()
	sortInfos(out)
	return out, nil
}

// All returns every tenant's sandboxes of the deployment, as of a listing
// started after notBefore (zero: the last listing, whenever it was). It is
// for lookups that name no tenant (a signed file URL names only its
// signature); answers to a tenant go through List.
func (m *Manager) All(ctx context.Context, notBefore time.Time) ([]Info, error) {
	if !notBefore.IsZero() {
		if err := m.refresh(ctx, notBefore); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	out := make([]Info, 0, len(m.byID))
	for _, e := range m.byID {
		if !e.removing {
			out = append(out, e.info)
		}
	}
	m.mu.Unlock()
	sortInfos(out)
	return out, nil
}

// Lookup returns the conversation's sandbox, NotFound when it has none. It
// never creates or starts anything. The state is as of the last refresh.
func (m *Manager) Lookup(ctx context.Context, tenant, conversation string) (Info, error) {
	if err := ValidateConversation(conversation); err != nil {
		return Info{}, err
	}
	e, err := m.find(ctx, tenant, conversation)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return e.info, nil
}

// Delete closes the sandbox's pipe and removes it with everything in it.
func (m *Manager) Delete(ctx context.Context, tenant, id string) error {
	info, err := m.Get(ctx, tenant, id)
	if err != nil {
		return err
	}
	unlock, err := m.convLocks.lock(ctx, convKey(tenant, info.Conversation))
	if err != nil {
		return errdefs.DeadlineExceeded("waiting for another operation on conversation %s: %v; retry", info.Conversation, err)
	}
	defer unlock()
	if err := m.remove(ctx, id); err != nil {
		return err
	}
	m.log.Info("sandbox deleted", "id", id, "tenant", tenant, "conversation", info.Conversation)
	return nil
}

// Counts returns the number of mapped sandboxes per state, for metrics: the
// deployment's own only.
func (m *Manager) Counts() map[string]int {
	out := map[string]int{StateRunning: 0, StateStopped: 0, StatePaused: 0, StateHibernated: 0}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.byID {
		if !e.removing {
			out[e.info.State]++
		}
	}
	return out
}

// Reconnects counts pipes re-opened after one had dropped.
func (m *Manager) Reconnects() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reconnects
}

// remove closes id's pipe and removes it from the backend and the cache; the
// caller holds the conversation's lock.
func (m *Manager) remove(ctx context.Context, id string) error {
	m.mu.Lock()
	e := m.byID[id]
	var c *agent.Client
	if e != nil {
		e.removing = true
		c, e.client = e.client, nil
	}
	m.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	err := m.backend.Remove(ctx, id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.mu.Lock()
		if e != nil {
			e.removing = false
		}
		m.mu.Unlock()
		return m.backendErr("remove sandbox "+id, err)
	}
	m.mu.Lock()
	var info Info
	if e != nil {
		info = e.info
	}
	m.dropLocked(id)
	m.mu.Unlock()
	if e != nil {
		m.changed(info, ChangeDeleted)
	}
	return nil
}

// find returns the conversation's cached entry, refreshing the cache on a
// miss unless a listing started within the miss-refresh window.
func (m *Manager) find(ctx context.Context, tenant, conversation string) (*entry, error) {
	m.mu.Lock()
	e := m.findLocked(tenant, conversation)
	m.mu.Unlock()
	if e != nil {
		return e, nil
	}
	if err := m.refresh(ctx, time.Now().Add(-m.opts.missRefresh)); err != nil {
		return nil, err
	}
	m.mu.Lock()
	e = m.findLocked(tenant, conversation)
	m.mu.Unlock()
	if e == nil {
		return nil, errdefs.NotFound("conversation %s has no sandbox; create one first", conversation)
	}
	return e, nil
}

// findLocked picks the conversation's sandbox; should the backend hold two
// (made by racing replicas), a running one wins, then the newest.
func (m *Manager) findLocked(tenant, conversation string) *entry {
	var best *entry
	for _, e := range m.byID {
		if e.removing || e.info.Tenant != tenant || e.info.Conversation != conversation {
			continue
		}
		if best == nil || better(e.info, best.info) {
			best = e
		}
	}
	return best
}

func better(a, b Info) bool {
	if (a.State == StateRunning) != (b.State == StateRunning) {
		return a.State == StateRunning
	}
	return a.CreatedAt.After(b.CreatedAt)
}

// insertLocked adds or updates info in the cache and returns its entry.
func (m *Manager) insertLocked(info Info) *entry {
	if e := m.byID[info.ID]; e != nil {
		e.setInfo(info)
		return e
	}
	m.gen++
	delete(m.tombstones, info.ID)
	e := &entry{gen: m.gen, lastUsed: m.opts.now()}
	e.setInfo(info)
	m.byID[info.ID] = e
	return e
}

// dropLocked removes id from the cache and leaves a tombstone. The pipe, if
// any, is the caller's to close (it is detached from the entry here).
func (m *Manager) dropLocked(id string) *agent.Client {
	e := m.byID[id]
	if e == nil {
		return nil
	}
	delete(m.byID, id)
	m.gen++
	m.tombstones[id] = m.gen
	c := e.client
	e.client = nil
	return c
}

// forget drops id from the cache after the backend said it is gone.
func (m *Manager) forget(id, why string) {
	m.mu.Lock()
	_, had := m.byID[id]
	c := m.dropLocked(id)
	m.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	if had {
		m.log.Info("sandbox dropped from the map", "id", id, "reason", why)
	}
}

func (m *Manager) checkOpen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errdefs.Unavailable("the sandbox manager is shutting down; retry on the restarted server")
	}
	return nil
}

// backendErr keeps a classified error and calls anything else a (possibly
// passing) engine failure.
func (m *Manager) backendErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errdefs.Code(err) != errdefs.ErrInternal.Error() || errors.Is(err, errdefs.ErrInternal) {
		return err
	}
	return errdefs.Unavailable("the %s backend could not %s: %v; retry shortly", m.name, op, err)
}

func errNoSandbox(id string) error {
	return errdefs.NotFound("sandbox %s not found; list your sandboxes to see their ids", quoteShort(id))
}

func convKey(tenant, conversation string) string { return tenant + "\x00" + conversation }

func sortInfos(infos []Info) {
	sort.Slice(infos, func(i, j int) bool {
		if !infos[i].CreatedAt.Equal(infos[j].CreatedAt) {
			return infos[i].CreatedAt.Before(infos[j].CreatedAt)
		}
		return infos[i].ID < infos[j].ID
	})
}
