package astgrep

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

// prepared is a change ast_edit made and resolve may write.
type prepared struct {
	id       string
	runID    string
	sandbox  string // the sandbox it was prepared in
	created  time.Time
	seq      uint64 // order of preparation, for dropping the oldest
	files    []preparedFile
	count    int // replacements
	bytes    int64
	language string
	conn     *tools.SandboxConn // where its sandbox copy is, for dropping it at the run's end
	saved    bool               // its sandbox copy was written: once that is gone, another replica resolved it
}

// preparedFile is one file of a prepared change: its content as read at
// preparation (by hash) and the content to write.
type preparedFile struct {
	abs     string
	oldSHA  string
	newData []byte
	edits   int
}

// store holds prepared edits per run, with a time to live and bounds on
// their number and size. It starts no goroutines: expiry is checked on
// every access.
type store struct {
	mu       sync.Mutex // guards edits and seq
	edits    map[string]*prepared
	seq      uint64
	ttl      time.Duration
	perRun   int
	maxBytes int64
	now      func() time.Time
}

func newStore() *store {
	return &store{edits: map[string]*prepared{}, ttl: 15 * time.Minute, perRun: 16, maxBytes: 32 << 20, now: time.Now}
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "edit-" + hex.EncodeToString(b[:])
}

// put keeps p, dropping expired edits and the run's oldest beyond perRun;
// it returns that oldest, whose sandbox copy the caller removes.
func (s *store) put(p *prepared) (evicted *prepared) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	if p.id == "" {
		p.id = newID()
	}
	if p.created.IsZero() {
		p.created = s.now()
	}
	s.seq++
	p.seq = s.seq
	var oldest *prepared
	n := 0
	for _, e := range s.edits {
		if e.runID != p.runID {
			continue
		}
		n++
		if oldest == nil || e.seq < oldest.seq {
			oldest = e
		}
	}
	if n >= s.perRun && oldest != nil {
		delete(s.edits, oldest.id)
		evicted = oldest
	}
	s.edits[p.id] = p
	return evicted
}

// lookup returns the run's edit, or why there is none ("unknown" or
// "expired").
func (s *store) lookup(runID, id string) (*prepared, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.edits[id]
	if !ok || p.runID != runID {
		return nil, "unknown"
	}
	if s.now().Sub(p.created) > s.ttl {
		delete(s.edits, id)
		return nil, "expired"
	}
	return p, ""
}

func (s *store) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.edits, id)
}

// dropRun forgets every edit of a run (its end) and returns them.
func (s *store) dropRun(runID string) []*prepared {
	s.mu.Lock()
	defer s.mu.Unlock()
	var dropped []*prepared
	for id, e := range s.edits {
		if e.runID == runID {
			delete(s.edits, id)
			dropped = append(dropped, e)
		}
	}
	return dropped
}

func (s *store) sweepLocked() {
	now := s.now()
	for id, e := range s.edits {
		if now.Sub(e.created) > s.ttl {
			delete(s.edits, id)
		}
	}
}
