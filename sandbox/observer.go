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
