package debug

import "github.com/sandboxd/sandboxd/tools"

// showOutput hands the debuggee's output events to sink until the returned
// func is called: what a streamed continue (or launch) shows while it waits
// for the program to stop. A nil sink shows nothing. The output is kept for
// the output op as always; the sink only sees it sooner.
func (s *session) showOutput(sink tools.OutputSink) (stop func()) {
	if sink == nil {
		return func() {}
	}
	s.mu.Lock()
	s.live = sink
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.live == sink {
			s.live = nil
		}
		s.mu.Unlock()
	}
}

// showLiveLocked passes one output event on; the sink does not block, so
// it is called with s.mu held, which keeps the events in order.
func (s *session) showLiveLocked(category, text string) {
	if s.live == nil || text == "" {
		return
	}
	stream := tools.StreamStdout
	if category != "stdout" {
		stream = tools.StreamStderr // stderr, and the adapter's "important" notes
	}
	s.live.Output(stream, text)
}
