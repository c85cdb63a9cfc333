package eval

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// nopWriteCloser takes the execute line the cell sends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Messages a restarted sandboxd gets twice (the agent resends what a dying
// session may not have read) belong to another cell: a stale done, stream
// or display is dropped, and the cell ends on its own done with its own
// output.
func TestStaleMessagesOfAnotherCellAreDropped(t *testing.T) {
	k := &kernel{lang: "javascript", in: nopWriteCloser{io.Discard}, msgs: make(chan message, 16), ended: make(chan struct{}), quit: make(chan struct{}), seq: 41}
	id := k.seq + 1 // what execute will send
	for _, m := range []message{
		{Type: "stream", Cell: 7, Name: "stdout", Text: "stale output\n"},
		{Type: "display", Cell: 7, Data: map[string]string{"text/plain": "'stale'"}},
		{Type: "done", ID: 7, Status: "ok"},
		{Type: "stream", Cell: id, Name: "stdout", Text: "fresh output\n"},
		{Type: "display", Cell: id, Data: map[string]string{"text/plain": "'fresh'"}},
		{Type: "done", ID: id, Status: "ok"},
	} {
		k.msgs <- m
	}
	out := newOutput(1<<16, 1<<16, 4)
	res := k.execute(context.Background(), message{Code: "greeting"}, time.Minute, time.Second, out, nil)
	if res.end != endDone || res.status != "ok" {
		t.Fatalf("cell ended %v %q, want done ok", res.end, res.status)
	}
	b, _ := json.Marshal(out.finish())
	text := string(b)
	if strings.Contains(text, "stale") || !strings.Contains(text, "fresh output") || !strings.Contains(text, "'fresh'") {
		t.Errorf("cell output = %s, want only the fresh cell's", text)
	}
}

// Cells are numbered from a random start, so a new attachment never
// reuses the numbers an earlier one (before a restart) gave out.
func TestCellNumbersStartAtRandom(t *testing.T) {
	seen := map[int64]bool{}
	for range 8 {
		k := &kernel{seq: newCellSeq()}
		if k.seq <= 0 || k.seq >= 1<<50 || seen[k.seq] {
			t.Fatalf("cell numbering starts at %d (seen before: %v), want a fresh number in (0, 2^50)", k.seq, seen[k.seq])
		}
		seen[k.seq] = true
	}
}
