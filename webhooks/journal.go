package webhooks

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/sandboxd/sandboxd/events"
)

// maxJournalLine bounds one journal line; an event is far smaller.
const maxJournalLine = 64 << 10

// journal is an endpoint's events not yet delivered, on disk: a line per
// event queued, written before it is queued, and a line per event
// delivered or given up. So an event survives a kill of sandboxd in
// between (the page cache holds what was written; only a crash of the
// machine loses the last lines), and the next start queues it again. The
// file is emptied whenever nothing is pending, so it stays small.
type journal struct {
	path string

	mu      sync.Mutex // guards f and pending, and orders the lines
	f       *os.File
	pending int // events written and not yet marked done
}

// journalLine is one line: an event queued, or the id of one done.
type journalLine struct {
	Event *events.Event `json:"event,omitempty"`
	Done  string        `json:"done,omitempty"`
}

// journalPath is the endpoint's journal file: named by a hash of its
// tenant and URL, so the secret is never in a name and a changed URL
// starts afresh.
func journalPath(dir string, ep Endpoint) string {
	h := sha256.Sum256([]byte(ep.Tenant + "\n" + ep.URL))
	return filepath.Join(dir, hex.EncodeToString(h[:8])+".jsonl")
}

// openJournal reads what the last process left at path (the events queued
// and not done, in their order; the first max of them, over is how many
// more there were), rewrites the file to hold just those, and opens it for
// appending.
func openJournal(path string, max int) (j *journal, left []events.Event, over int, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, 0, err
	}
	if left, err = readJournal(path); err != nil {
		return nil, nil, 0, err
	}
	if len(left) > max {
		left, over = left[:max], len(left)-max
	}
	if err := rewriteJournal(path, left); err != nil {
		return nil, nil, 0, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, 0, err
	}
	return &journal{path: path, f: f, pending: len(left)}, left, over, nil
}

// restore opens w's journal and queues the events the last process left in
// it, before any new one. Without a journal dir it does nothing; a journal
// that cannot be opened leaves the endpoint's events in memory only.
func (d *Dispatcher) restore(w *worker) {
	if d.opts.JournalDir == "" {
		return
	}
	path := journalPath(d.opts.JournalDir, w.ep)
	j, left, over, err := openJournal(path, cap(w.queue))
	if err != nil {
		d.opts.Log.Warn("the webhook journal cannot be opened; this endpoint's events are kept in memory only", "url", w.ep.URL, "path", path, "err", err)
		return
	}
	w.j = j
	for _, ev := range left {
		w.queue <- queued{ev: ev, kept: true}
		d.opts.Metrics.queue(1)
	}
	for range over {
		d.opts.Metrics.count(OutcomeDropped)
	}
	if len(left) > 0 {
		d.opts.Log.Info("webhook events left by the last start are queued again", "url", w.ep.URL, "count", len(left), "dropped", over)
	}
}

// readJournal is the events of path not marked done, in order; a line
// that does not parse (the last one, cut by a crash) is skipped.
func readJournal(path string) ([]events.Event, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var order []events.Event
	done := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), maxJournalLine)
	for sc.Scan() {
		var l journalLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch {
		case l.Event != nil && l.Event.ID != "":
			order = append(order, *l.Event)
		case l.Done != "":
			done[l.Done] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	left := order[:0]
	for _, ev := range order {
		if !done[ev.ID] {
			left = append(left, ev)
		}
	}
	return left, nil
}

// rewriteJournal replaces path with evs' lines, through a temporary file
// and a rename so a crash leaves the old file or the new one whole.
func rewriteJournal(path string, evs []events.Event) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for i := range evs {
		if err := enc.Encode(journalLine{Event: &evs[i]}); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// add writes ev's line; the caller queues ev after it.
func (j *journal) add(ev events.Event) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.writeLocked(journalLine{Event: &ev}); err != nil {
		return err
	}
	j.pending++
	return nil
}

// done marks the event id delivered or given up; once none is pending the
// file is emptied.
func (j *journal) done(id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.pending > 0 {
		j.pending--
	}
	if j.pending == 0 {
		return j.f.Truncate(0) // appends go on at the new end
	}
	return j.writeLocked(journalLine{Done: id})
}

func (j *journal) writeLocked(l journalLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = j.f.Write(append(b, '\n'))
	return err
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}
