package ports

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/events"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Preview is one link to a port of a sandbox, as the API lists it.
type Preview struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Port      int       `json:"port"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// LabelPreviews is the sandbox annotation that keeps its previews (those
// not yet expired, revoked ones marked) where the backend can annotate.
const LabelPreviews = "io.sandboxd.previews"

// MaxPerSandbox caps the live (unexpired, unrevoked) previews of one
// sandbox, which bounds the file and the annotation.
const MaxPerSandbox = 100

// ErrDenied is the class of a preview request refused for its link: not
// issued here, expired, revoked. The API answers it with 403.
var ErrDenied = errors.New("preview link refused")

type denied struct{ msg string }

func (d denied) Error() string        { return d.msg }
func (d denied) Is(target error) bool { return target == ErrDenied }

func deny(format string, args ...any) error { return denied{fmt.Sprintf(format, args...)} }

// record is one preview as kept in the file and the annotation.
type record struct {
	Claims
	Created int64 `json:"c"`
	Revoked int64 `json:"r,omitempty"` // Unix seconds; 0 while live
}

// Options are a Service's parts.
type Options struct {
	// DataDir keeps previews.json and, without Secret, preview.key.
	DataDir string
	// Secret signs the tokens; every replica must have the same (the peer
	// key). nil: a key kept in DataDir.
	Secret     []byte
	Domain     string        // config preview.domain
	DefaultTTL time.Duration // 0: config.DefaultPreviewTTL
	MaxTTL     time.Duration // 0: config.DefaultPreviewMaxTTL
	// Annotate keeps a sandbox's previews on the sandbox itself where the
	// backend can (sandbox.ErrNoAnnotations where it cannot).
	Annotate func(ctx context.Context, info sandbox.Info, key, value string) error
	Log      *slog.Logger
	Now      func() time.Time // tests
	// Events hears each link made and revoked (the audit record); nil:
	// nobody.
	Events events.Sink
}

// Service issues, lists, checks and revokes preview links, and proxies
// to the sandboxes' ports (Proxy). It starts no goroutines of its own;
// Close closes the proxy's idle connections.
type Service struct {
	*Proxy
	signer   signer
	domain   string
	def, max time.Duration
	file     string
	annotate func(ctx context.Context, info sandbox.Info, key, value string) error
	log      *slog.Logger
	now      func() time.Time
	events   events.Sink // nil: none

	mu   sync.Mutex        // guards recs and cuts, and writing the file
	recs map[string]record // by preview id, expired ones dropped at each change
	cuts map[string]cut    // by preview id
}

// cut is closed when its preview is revoked; it is dropped once the
// preview has expired (its requests end at the expiry anyway).
type cut struct {
	ch       chan struct{}
	expires  int64
	inflight *sync.WaitGroup // the requests of the preview that are open
}

// New loads the previews kept in o.DataDir (and its key, made on first
// use when o.Secret is nil).
func New(o Options) (*Service, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DefaultTTL == 0 {
		o.DefaultTTL = time.Hour
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = max(24*time.Hour, o.DefaultTTL)
	}
	secret := o.Secret
	if secret == nil {
		var err error
		if secret, err = loadKey(filepath.Join(o.DataDir, "preview.key")); err != nil {
			return nil, err
		}
	}
	s := &Service{Proxy: NewProxy(), signer: newSigner(secret), domain: o.Domain, def: o.DefaultTTL, max: o.MaxTTL,
		file: filepath.Join(o.DataDir, "previews.json"), annotate: o.Annotate, log: o.Log, now: o.Now, events: o.Events,
		recs: map[string]record{}, cuts: map[string]cut{}}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// Domain is the host-based previews' domain ("" for path-based).
func (s *Service) Domain() string { return s.domain }

// Close closes the proxy's idle connections.
func (s *Service) Close() error {
	s.Proxy.Close()
	return nil
}

// loadKey reads the 32-byte key at path, making it when it is missing.
func loadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("the preview key %s cannot be read: %w", path, err)
	}
	b = make([]byte, 32)
	rand.Read(b)
	if err := writeFile(path, b); err != nil {
		return nil, fmt.Errorf("the preview key %s cannot be written: %w", path, err)
	}
	return b, nil
}

// writeFile replaces path with data whole (a crash leaves the old or the new).
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (s *Service) load() error {
	b, err := os.ReadFile(s.file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the previews of the previous start cannot be read from %s: %w", s.file, err)
	}
	var recs []record
	if err := json.Unmarshal(b, &recs); err != nil {
		// Losing the list would forget revocations: refuse to start, so
		// an operator looks (or removes the file, revoking nothing).
		return fmt.Errorf("%s does not parse (%v); fix or remove it (removing it forgets which preview links were revoked: they work again until they expire)", s.file, err)
	}
	for _, r := range recs {
		s.recs[r.ID] = r
	}
	return nil
}

// saveLocked writes the unexpired previews to the file.
func (s *Service) saveLocked() error {
	now := s.now().Unix()
	recs := make([]record, 0, len(s.recs))
	for id, r := range s.recs {
		if r.Expires <= now {
			delete(s.recs, id)
			continue
		}
		recs = append(recs, r)
	}
	for id, c := range s.cuts {
		if c.expires <= now {
			delete(s.cuts, id)
		}
	}
	slices.SortFunc(recs, func(a, b record) int { return int(a.Created - b.Created) })
	b, _ := json.Marshal(recs)
	return writeFile(s.file, b)
}

// Create issues a link to port of info's sandbox for ttl (0: the default).
// base is scheme://host the request reached sandboxd at.
func (s *Service) Create(ctx context.Context, info sandbox.Info, port int, ttl time.Duration, base string) (Preview, error) {
	if err := CheckPort(port); err != nil {
		return Preview{}, err
	}
	switch {
	case ttl < 0:
		return Preview{}, errdefs.InvalidArgument("ttl_s %d is negative; give the link's lifetime in seconds, at most %d, or leave it out for %d", int(ttl/time.Second), int(s.max/time.Second), int(s.def/time.Second))
	case ttl == 0:
		ttl = s.def
	case ttl > s.max:
		return Preview{}, errdefs.InvalidArgument("ttl_s %d is longer than this sandboxd allows (%d, preview.max_ttl); ask for at most that", int(ttl/time.Second), int(s.max/time.Second))
	}
	now := s.now()
	r := record{Claims: Claims{ID: newID(), Tenant: info.Tenant, Sandbox: info.ID, Port: port, Expires: now.Add(ttl).Unix()}, Created: now.Unix()}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.ofLocked(info)
	live := 0
	for _, o := range mine {
		if o.Revoked == 0 && o.Expires > now.Unix() {
			live++
		}
	}
	if live >= MaxPerSandbox {
		return Preview{}, errdefs.ResourceExhausted("sandbox %s has %d live preview links, the most it may have; revoke some (DELETE /v1/sandboxes/%s/previews/{preview}) or let them expire", info.ID, live, info.ID)
	}
	s.recs[r.ID] = r
	if err := s.saveLocked(); err != nil {
		delete(s.recs, r.ID)
		return Preview{}, errdefs.Unavailable("the preview link cannot be recorded in %s (%v); retry, or free space in sandboxd's data dir", s.file, err)
	}
	s.annotateLocked(ctx, info, append(mine, r))
	s.emit(events.PreviewCreated, info, r)
	return s.previewOf(r, base), nil
}

// emit tells the events sink of a link made or revoked.
func (s *Service) emit(typ string, info sandbox.Info, r record) {
	if s.events != nil {
		s.events.Emit(events.Event{Type: typ, Tenant: info.Tenant, Sandbox: info.ID, Conversation: info.Conversation,
			Preview: r.ID, Target: "port " + strconv.Itoa(r.Port)})
	}
}

// List returns info's live previews, oldest first.
func (s *Service) List(ctx context.Context, info sandbox.Info, base string) []Preview {
	s.mu.Lock()
	mine := s.ofLocked(info)
	s.mu.Unlock()
	now := s.now().Unix()
	out := []Preview{}
	for _, r := range mine {
		if r.Revoked == 0 && r.Expires > now {
			out = append(out, s.previewOf(r, base))
		}
	}
	return out
}

// cutWait bounds how long Revoke waits for the requests it cut to end.
const cutWait = 5 * time.Second

// Revoke ends the preview id of info's sandbox at once: the next request
// is refused, and open ones (WebSocket, streams) are cut; it returns once
// they have ended (at most cutWait), so a client told the link is revoked
// gets nothing more through it.
func (s *Service) Revoke(ctx context.Context, info sandbox.Info, id string) error {
	inflight, err := s.revoke(ctx, info, id)
	if err != nil || inflight == nil {
		return err
	}
	ended := make(chan struct{})
	go func() { inflight.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(cutWait):
		s.log.Warn("requests of a revoked preview link were still ending when the revocation answered", "preview", id, "sandbox", info.ID, "waited", cutWait)
	}
	return nil
}

// revoke records the revocation and closes the preview's cut, returning
// the requests it cut (nil when none were open).
func (s *Service) revoke(ctx context.Context, info sandbox.Info, id string) (*sync.WaitGroup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.ofLocked(info)
	i := slices.IndexFunc(mine, func(r record) bool { return r.ID == id })
	now := s.now().Unix()
	if i < 0 || mine[i].Expires <= now {
		return nil, errdefs.NotFound("sandbox %s has no live preview %q; list them with GET /v1/sandboxes/%s/previews", info.ID, id, info.ID)
	}
	r := mine[i]
	if r.Revoked != 0 {
		return nil, nil // revoking twice is revoking
	}
	r.Revoked = now
	prev, had := s.recs[id]
	s.recs[id] = r
	if err := s.saveLocked(); err != nil {
		if had {
			s.recs[id] = prev
		} else {
			delete(s.recs, id)
		}
		return nil, errdefs.Unavailable("the revocation cannot be recorded in %s (%v); retry, or free space in sandboxd's data dir", s.file, err)
	}
	mine[i] = r
	s.annotateLocked(ctx, info, mine)
	s.emit(events.PreviewRevoked, info, r)
	c, ok := s.cuts[id]
	if !ok {
		return nil, nil
	}
	close(c.ch)
	delete(s.cuts, id)
	return c.inflight, nil
}

// ofLocked is info's previews: those in memory and those on its
// annotation (another replica's, before a failover), by creation.
func (s *Service) ofLocked(info sandbox.Info) []record {
	byID := map[string]record{}
	for _, r := range annotated(info) {
		if r.Sandbox == info.ID && r.Tenant == info.Tenant {
			byID[r.ID] = r
		}
	}
	for id, r := range s.recs {
		if r.Sandbox != info.ID || r.Tenant != info.Tenant {
			continue
		}
		if o, ok := byID[id]; ok && o.Revoked != 0 && r.Revoked == 0 {
			r.Revoked = o.Revoked
		}
		byID[id] = r
	}
	out := slices.Collect(maps.Values(byID))
	slices.SortFunc(out, func(a, b record) int {
		if a.Created != b.Created {
			return int(a.Created - b.Created)
		}
		return cmpString(a.ID, b.ID)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// annotated reads the previews kept on info's annotation.
func annotated(info sandbox.Info) []record {
	raw, ok := info.Labels[LabelPreviews]
	if !ok {
		return nil
	}
	var recs []record
	json.Unmarshal([]byte(raw), &recs) // a damaged annotation is as none: the file still holds this replica's
	return recs
}

// annotateLocked keeps recs (unexpired) on the sandbox where the backend
// can; a backend that cannot is fine (one replica, the file keeps them).
func (s *Service) annotateLocked(ctx context.Context, info sandbox.Info, recs []record) {
	if s.annotate == nil {
		return
	}
	now := s.now().Unix()
	recs = slices.DeleteFunc(slices.Clone(recs), func(r record) bool { return r.Expires <= now })
	b, _ := json.Marshal(recs)
	err := s.annotate(ctx, info, LabelPreviews, string(b))
	if err != nil && !errors.Is(err, sandbox.ErrNoAnnotations) {
		s.log.Warn("a sandbox's preview links are not kept on it; other replicas learn of a revocation only from this one", "sandbox", info.ID, "err", err)
	}
}

func (s *Service) previewOf(r record, base string) Preview {
	return Preview{ID: r.ID, URL: s.Link(r.Claims, base), Port: r.Port, CreatedAt: time.Unix(r.Created, 0).UTC(), ExpiresAt: r.ExpiresAt()}
}

// Link is the URL a browser opens for c: under the domain's host when
// there is one (the port of base kept), else /p/{token}/ on base.
func (s *Service) Link(c Claims, base string) string {
	tok := s.signer.sign(c)
	if s.domain == "" {
		return base + PathPrefix + tok + "/"
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		u = &url.URL{Scheme: "https"}
	}
	host := HostLabel(c) + "." + s.domain
	if _, p, err := net.SplitHostPort(u.Host); err == nil {
		host = net.JoinHostPort(host, p)
	}
	return (&url.URL{Scheme: u.Scheme, Host: host, Path: "/", RawQuery: CookieName + "=" + url.QueryEscape(tok)}).String()
}

// Verify checks a preview request's token: issued here, not expired, not
// revoked as this replica knows. Check completes it with the sandbox's
// annotation once the sandbox is looked up.
func (s *Service) Verify(l Located) (Claims, error) {
	if l.Token == "" {
		return Claims{}, deny("this preview needs its link: open the URL the preview was created with (its first visit sets the cookie that the rest of the page uses)")
	}
	c, err := s.signer.verify(l.Token)
	if err != nil {
		return Claims{}, denied{err.Error()}
	}
	if l.Host && (l.HostPort != c.Port || l.HostID != c.ID) {
		return Claims{}, deny("this preview link belongs to %s.%s, not to this host; open it at its own address", HostLabel(c), s.domain)
	}
	if exp := c.ExpiresAt(); !s.now().Before(exp) {
		return Claims{}, deny("this preview link expired at %s; ask for a new one", exp.Format(time.RFC3339))
	}
	s.mu.Lock()
	r, ok := s.recs[c.ID]
	s.mu.Unlock()
	if ok && r.Revoked != 0 {
		return Claims{}, revoked(r)
	}
	return c, nil
}

func revoked(r record) error {
	return deny("this preview link was revoked at %s; ask for a new one", time.Unix(r.Revoked, 0).UTC().Format(time.RFC3339))
}

// Check refuses c when the sandbox's annotation says it was revoked (by
// another replica, before this one owned the sandbox).
func (s *Service) Check(c Claims, info sandbox.Info) error {
	for _, r := range annotated(info) {
		if r.ID == c.ID && r.Revoked != 0 {
			return revoked(r)
		}
	}
	return nil
}

// Cut is closed when preview c is revoked, for a request in flight; the
// request calls done once it has ended (Revoke waits for that).
func (s *Service) Cut(c Claims) (cut <-chan struct{}, done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.recs[c.ID]; ok && r.Revoked != 0 {
		ch := make(chan struct{})
		close(ch)
		return ch, func() {}
	}
	k, ok := s.cuts[c.ID]
	if !ok {
		k = cutOf(c.Expires)
		s.cuts[c.ID] = k
	}
	k.inflight.Add(1)
	return k.ch, sync.OnceFunc(k.inflight.Done)
}

func cutOf(expires int64) cut {
	return cut{ch: make(chan struct{}), expires: expires, inflight: &sync.WaitGroup{}}
}

// CheckPort refuses a port outside 1–65535.
func CheckPort(port int) error {
	if port < 1 || port > 65535 {
		return errdefs.InvalidArgument("port %d is outside 1–65535; give the TCP port the server listens on inside the sandbox", port)
	}
	return nil
}
