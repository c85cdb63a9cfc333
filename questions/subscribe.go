package questions

import "sync"

// Event types on a space's stream (the SSE event names).
const (
	EventQuestion = "question"
	EventResolved = "resolved"
)

// Event is one change on a space: a new card or a resolved one.
type Event struct {
	Type     string
	Question *Question   // for EventQuestion
	Resolved *Resolution // for EventResolved
}

// Subscription is one human's stream on a space. While it is open the space
// counts as having a connected human. Its Done channel closes when the port
// drops it (it fell too far behind, or the port closed); the stream should
// then end so the console reconnects and resynchronises.
type Subscription struct {
	p      *Port
	key    spaceKey
	events chan Event
	done   chan struct{}
	once   sync.Once // closes done
}

// Subscribe opens a stream on the tenant's space and returns it with the
// questions pending at that moment; taken under one lock, so no event falls
// between the snapshot and the stream. Close it when the stream ends.
func (p *Port) Subscribe(tenant, space string) (*Subscription, []Question) {
	s := &Subscription{p: p, key: spaceKey{tenant, space}, events: make(chan Event, subBuffer), done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		s.endLocked()
		return s, []Question{}
	}
	subs := p.spaces[s.key]
	if subs == nil {
		subs = map[*Subscription]struct{}{}
		p.spaces[s.key] = subs
	}
	subs[s] = struct{}{}
	return s, p.pendingLocked(s.key)
}

// Events delivers the space's events in order.
func (s *Subscription) Events() <-chan Event { return s.events }

// Done closes when the port has dropped this subscription.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Close ends the subscription; from then on it no longer counts as a
// connected human. Safe to call more than once.
func (s *Subscription) Close() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.dropLocked(s)
}

func (s *Subscription) endLocked() { s.once.Do(func() { close(s.done) }) }

func (p *Port) dropLocked(s *Subscription) {
	if subs := p.spaces[s.key]; subs != nil {
		delete(subs, s)
		if len(subs) == 0 {
			delete(p.spaces, s.key)
		}
	}
	s.endLocked()
}

// publishLocked fans ev out without blocking: a subscriber whose buffer is
// full is dropped rather than allowed to stall every other caller.
func (p *Port) publishLocked(key spaceKey, ev Event) {
	for s := range p.spaces[key] {
		select {
		case s.events <- ev:
		default:
			p.dropLocked(s)
		}
	}
}
