package sandbox

// Pipes kept open: a sandbox whose programs reach the world through its
// agent's pipe (network mode "proxy") needs the pipe while nobody calls a
// tool, say after a restart, or a program it started waits for a tool
// call to carry its connections. The manager opens a pipe to each running
// sandbox its keep function names, on every periodic refresh and once at
// once when the function is set.

// SetKeepAttached makes the manager keep a pipe open to every running
// sandbox keep says yes to (nil stops it; open pipes stay). Call it once the
// attach hooks are in place: a pipe it opens runs them like any other.
func (m *Manager) SetKeepAttached(keep func(Info) bool) {
	if keep == nil {
		m.keep.Store(nil)
		return
	}
	m.keep.Store(&keep)
	m.keepAttached()
}

// keepAttached starts a dialer for each kept sandbox without a pipe. It
// waits for none: the dialers run under the manager's context, and a
// failure is logged by the dialer and tried again at the next refresh.
func (m *Manager) keepAttached() {
	kp := m.keep.Load()
	if kp == nil {
		return
	}
	keep := *kp
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, e := range m.byID {
		if e.removing || e.dial != nil || e.info.State != StateRunning || e.client != nil && !isDone(e.client) || !keep(e.info) {
			continue
		}
		d := &dialing{done: make(chan struct{})}
		e.dial = d
		m.wg.Add(1)
		go m.dialer(e, d)
	}
}
