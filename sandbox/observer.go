package sandbox

// Observer hears about agent pipes; the metrics package implements it. Calls
// are made synchronously from the Manager's goroutines and must not block.
type Observer interface {
	PipeOpened(backend string)
	PipeClosed(backend string)
	AgentReconnected(backend string)
}

type nopObserver struct{}

func (nopObserver) PipeOpened(string)       {}
func (nopObserver) PipeClosed(string)       {}
func (nopObserver) AgentReconnected(string) {}

var _ Observer = nopObserver{}

// Changes a LifecycleObserver hears.
const (
	ChangeCreated    = "created"
	ChangePaused     = "paused"
	ChangeResumed    = "resumed"
	ChangeHibernated = "hibernated"
	ChangeDeleted    = "deleted"
)

// LifecycleObserver hears a tenant's sandbox change state, once the engine
// has done it: by a call, by the idle lifecycle or by expiry. The webhooks
// implement it. It is called with the conversation's lock held, so a
// sandbox's changes arrive in the order they happened; it must not block.
type LifecycleObserver interface {
	SandboxChanged(info Info, change string)
}

// changeOf is the change that reaching state is, "" for none reported.
func changeOf(state string) string {
	switch state {
	case StatePaused:
		return ChangePaused
	case StateHibernated:
		return ChangeHibernated
	case StateRunning:
		return ChangeResumed
	}
	return ""
}

// changed tells the lifecycle observer, if any.
func (m *Manager) changed(info Info, change string) {
	if m.opts.lifecycleObs != nil && change != "" {
		m.opts.lifecycleObs.SandboxChanged(info, change)
	}
}
