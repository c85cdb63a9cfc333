package api

import (
	"strings"
	"testing"
)

func joined(evs []OutputEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Stream + ":" + e.Text + "|")
	}
	return b.String()
}

// TestOutputQueueJoinsAndKeepsOrder: text of one stream is joined until
// the other stream writes; the order across streams is kept.
func TestOutputQueueJoinsAndKeepsOrder(t *testing.T) {
	q := newOutputQueue(1<<20, 1<<10)
	q.Output("stdout", "a")
	q.Output("stdout", "b")
	q.Output("stderr", "c")
	q.Output("stdout", "d")
	if got := joined(q.take()); got != "stdout:ab|stderr:c|stdout:d|" {
		t.Fatalf("took %q", got)
	}
	if got := q.take(); len(got) != 0 {
		t.Fatalf("second take %+v", got)
	}
}

// TestOutputQueueCap: the stream shows at most maxBytes of text, cut on a
// character boundary, and says it was truncated once.
func TestOutputQueueCap(t *testing.T) {
	q := newOutputQueue(10, 1<<10)
	q.Output("stdout", "12345678")
	q.Output("stdout", "9é0000") // é is two bytes: the cut must not split it
	q.Output("stdout", "more")
	q.Output("stderr", "more")
	evs := q.take()
	got := joined(evs)
	if !strings.HasPrefix(got, "stdout:123456789|stdout:\n[output truncated") || strings.Count(got, "truncated") != 1 || strings.Contains(got, "more") {
		t.Fatalf("took %q", got)
	}
	q.Output("stdout", "again")
	if evs := q.take(); len(evs) != 0 {
		t.Fatalf("after the cap: %+v", evs)
	}
}

// TestOutputQueueSlowClient: a writer that does not take in time never
// blocks Output; what did not fit is dropped, and one marker at the gap
// says how many bytes, after which text flows again.
func TestOutputQueueSlowClient(t *testing.T) {
	q := newOutputQueue(1<<20, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Output("stdout", "1234")
		q.Output("stdout", "5678")
		q.Output("stdout", "9") // full: dropped
		q.Output("stderr", "x") // would fit, but drops continue until the writer catches up
	}()
	<-done // Output returned without anyone taking
	got := joined(q.take())
	if got != "stdout:12345678|stdout:\n[2 bytes of output not shown: the client read the stream too slowly]\n|" {
		t.Fatalf("took %q", got)
	}
	q.Output("stderr", "back")
	if got := joined(q.take()); got != "stderr:back|" {
		t.Fatalf("after catching up %q", got)
	}
	select {
	case <-q.notify:
	default:
		t.Fatal("no notification is waiting for the writer")
	}
}
