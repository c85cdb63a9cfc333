package debug

import (
	"fmt"
	"strings"
	"sync"
)

// startLogCap bounds each end of the start log: its first and its last
// startLogCap bytes are kept, the middle is counted.
const startLogCap = 3 << 10

// startLog keeps every output event an adapter sends while a session
// starts, whatever its category (the compiler's errors, a Python import
// error, lldb's complaint): a launch that fails quotes it, since the
// "debug console" adapters point at is nowhere the model can see.
type startLog struct {
	// mu guards every field below.
	mu      sync.Mutex
	closed  bool // the session started; later output is the program's
	head    []byte
	tail    []byte
	dropped int
}

func (l *startLog) add(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if room := startLogCap - len(l.head); room > 0 {
		n := min(room, len(text))
		l.head = append(l.head, text[:n]...)
		text = text[n:]
	}
	l.tail = append(l.tail, text...)
	if over := len(l.tail) - startLogCap; over > 0 {
		l.tail = append(l.tail[:0], l.tail[over:]...)
		l.dropped += over
	}
}

// close stops collecting once the session has started.
func (l *startLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.head, l.tail, l.dropped = nil, nil, 0
}

// String is the collected output, head and tail, "" when there was none.
func (l *startLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := string(l.head)
	if l.dropped > 0 {
		s += fmt.Sprintf("\n[… %d bytes left out …]\n", l.dropped)
	}
	s += string(l.tail)
	return strings.TrimSpace(s)
}

// withStartOutput adds what the adapter printed while starting to a start
// failure, and drops the pointer to a console nobody can read.
func withStartOutput(msg, output string) string {
	if output == "" {
		return msg
	}
	msg = strings.TrimSpace(strings.ReplaceAll(msg, "Check the debug console for details.", ""))
	return msg + "\nThe adapter's output:\n" + output
}

// adapterErrorLine turns an adapter's refusal that carries a Python
// traceback (pydevd responds to a bad evaluate with its own stack) into the
// user's error alone: the traceback's last line, "SyntaxError: …".
// Anything else comes back as it is.
func adapterErrorLine(msg string) string {
	if !strings.Contains(msg, "Traceback (most recent call last):") {
		return msg
	}
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "^") {
			return l
		}
	}
	return msg
}
