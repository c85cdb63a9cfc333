// Package events carries sandboxd's lifecycle events from where they happen
// (the sandbox manager, the run store, the question port, the preview
// links, the egress proxy) to the parts that keep or send them (the audit
// record, the webhooks). A Bus holds no queue and starts no goroutine:
// Emit calls each sink in turn, and a sink must not block.
package events

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Event types. The webhooks send the sandbox, run and question types; the
// audit record keeps every one.
const (
	SandboxCreated    = "sandbox.created"
	SandboxPaused     = "sandbox.paused"
	SandboxResumed    = "sandbox.resumed"
	SandboxHibernated = "sandbox.hibernated"
	SandboxDeleted    = "sandbox.deleted"
	RunCreated        = "run.created"
	RunEnded          = "run.ended"
	QuestionAsked     = "question.asked"
	QuestionAnswered  = "question.answered"
	PreviewCreated    = "preview.created"
	PreviewRevoked    = "preview.revoked"
	EgressAllowed     = "egress.allowed"
	EgressDenied      = "egress.denied"
)

// Event is one thing that happened to a tenant's sandbox, run or question.
// It is also the JSON body of a webhook delivery.
type Event struct {
	ID           string    `json:"id"` // unique per event, the same on every delivery attempt
	Type         string    `json:"type"`
	Time         time.Time `json:"time"` // when it happened
	Tenant       string    `json:"tenant"`
	Sandbox      string    `json:"sandbox,omitempty"`
	Conversation string    `json:"conversation,omitempty"`
	Run          string    `json:"run,omitempty"`
	Question     string    `json:"question,omitempty"`
	Preview      string    `json:"preview,omitempty"`
	// Reason says why: a run's end reason, a question's resolution
	// (answered, skipped, expired, withdrawn, canceled), an egress
	// decision's one sentence.
	Reason string `json:"reason,omitempty"`
	// Target is what an egress decision was about ("connect
	// pypi.org:443"), or a preview's port ("port 3000").
	Target string `json:"target,omitempty"`
}

// Sink takes events. Emit is called on the goroutine of the action that
// made the event, sometimes under its lock: it must not block.
type Sink interface {
	Emit(Event)
}

// Bus hands every event to every sink added. Its zero value is ready; a nil
// *Bus drops events, so a part without one needs no check.
type Bus struct {
	mu    sync.RWMutex // guards sinks
	sinks []Sink
}

var _ Sink = (*Bus)(nil)

// Add makes s hear every event emitted from now on. A nil *Bus, which
// emits nothing, takes no sink.
func (b *Bus) Add(s Sink) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sinks = append(b.sinks, s)
}

// Emit fills in ev's ID and Time when empty and hands it to each sink.
func (b *Bus) Emit(ev Event) {
	if b == nil {
		return
	}
	if ev.ID == "" {
		ev.ID = NewID()
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, s := range b.sinks {
		s.Emit(ev)
	}
}

// NewID is a fresh event id: "evt_" and 32 hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "evt_" + hex.EncodeToString(b[:])
}
