package audit

import (
	"strings"

	"github.com/sandboxd/sandboxd/events"
)

// EventRecorder records lifecycle events (package events) as KindEvent
// records. They are buffered, not waited for: the event's action has its
// own record already when a call made it, and a sink must not block.
type EventRecorder struct{ log *Log }

var _ events.Sink = EventRecorder{}

// NewEventRecorder records events in l.
func NewEventRecorder(l *Log) EventRecorder { return EventRecorder{log: l} }

// Emit appends ev's record.
func (e EventRecorder) Emit(ev events.Event) {
	rec := Record{Time: ev.Time, Kind: KindEvent, Tenant: ev.Tenant, Run: ev.Run, Conversation: ev.Conversation,
		Sandbox: ev.Sandbox, Action: ev.Type, Outcome: eventOutcome(ev), Detail: eventDetail(ev)}
	if err := e.log.Append(rec, false); err != nil {
		e.log.log.Warn("an event's audit record was not written", "type", ev.Type, "sandbox", ev.Sandbox, "err", err)
	}
}

// eventOutcome is "denied" for a refused egress, the resolution of an
// answered question, else "ok".
func eventOutcome(ev events.Event) string {
	switch ev.Type {
	case events.EgressDenied:
		return "denied"
	case events.QuestionAnswered:
		if ev.Reason != "" {
			return ev.Reason
		}
	}
	return "ok"
}

// eventDetail names what the event is about, in a few words.
func eventDetail(ev events.Event) string {
	var parts []string
	if ev.Question != "" {
		parts = append(parts, "question "+ev.Question)
	}
	if ev.Preview != "" {
		parts = append(parts, "preview "+ev.Preview)
	}
	if ev.Target != "" {
		parts = append(parts, ev.Target)
	}
	if ev.Reason != "" && ev.Type != events.QuestionAnswered {
		parts = append(parts, ev.Reason)
	}
	return strings.Join(parts, ": ")
}
