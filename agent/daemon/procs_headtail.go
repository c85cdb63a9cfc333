package daemon

import "sync"

// headTail keeps the first and last bytes written to it, up to max in all,
// and counts what it dropped from the middle.
type headTail struct {
	// mu guards every field below; the reader of a pipe writes, the handler reads.
	mu      sync.Mutex
	headMax int
	tailMax int
	head    []byte
	tail    []byte // ring of tailMax bytes once full
	tailPos int    // next write position in a full ring
	total   int64
}

func newHeadTail(max int) *headTail {
	h := max / 2
	return &headTail{headMax: h, tailMax: max - h}
}

func (b *headTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if b.tailMax == 0 {
		return n, nil
	}
	if len(p) >= b.tailMax {
		b.tail = append(b.tail[:0], p[len(p)-b.tailMax:]...)
		b.tailPos = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(b.tail) < b.tailMax {
			k := min(b.tailMax-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(b.tail[b.tailPos:], p)
		b.tailPos = (b.tailPos + k) % b.tailMax
		p = p[k:]
	}
	return n, nil
}

// bytes returns head and tail joined, and how many bytes lie between them.
func (b *headTail) bytes() ([]byte, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]byte, 0, len(b.head)+len(b.tail))
	out = append(out, b.head...)
	if len(b.tail) == b.tailMax {
		out = append(out, b.tail[b.tailPos:]...)
		out = append(out, b.tail[:b.tailPos]...)
	} else {
		out = append(out, b.tail...)
	}
	return out, b.total - int64(len(out))
}
