package webhooks

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// maxSpoolLine bounds one spooled event's line; an Event is far smaller.
const maxSpoolLine = 64 << 10

// spoolPath is the endpoint's spool file: named by a hash of its tenant and
// URL, so the secret is never in a name and a changed URL starts afresh.
func (d *Dispatcher) spoolPath(ep Endpoint) string {
	h := sha256.Sum256([]byte(ep.Tenant + "\n" + ep.URL))
	return filepath.Join(d.opts.SpoolDir, hex.EncodeToString(h[:8])+".jsonl")
}

// keep writes the events w did not deliver to its spool file, or counts
// them as dropped when there is no spool or it cannot be written.
func (d *Dispatcher) keep(w *worker, evs []Event) {
	if len(evs) == 0 {
		return
	}
	if d.opts.SpoolDir != "" {
		err := d.writeSpool(d.spoolPath(w.ep), evs)
		if err == nil {
			d.opts.Log.Info("webhook events not delivered yet are kept for the next start", "url", w.ep.URL, "count", len(evs))
			return
		}
		d.opts.Log.Warn("webhook events not delivered yet cannot be kept; they are dropped", "url", w.ep.URL, "count", len(evs), "err", err)
	}
	for range evs {
		d.opts.Metrics.count(OutcomeDropped)
	}
}

// writeSpool writes evs as JSON lines, through a temporary file and a
// rename so a crash leaves the old file or the new one whole.
func (d *Dispatcher) writeSpool(path string, evs []Event) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, ev := range evs {
		if err := enc.Encode(ev); err != nil {
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

// restore queues the events spooled for w's endpoint at the last Close,
// before any new one, and removes the file. Events past the queue's cap
// are dropped and counted; a line that is not an event is skipped.
func (d *Dispatcher) restore(w *worker) {
	if d.opts.SpoolDir == "" {
		return
	}
	path := d.spoolPath(w.ep)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		d.opts.Log.Warn("spooled webhook events cannot be read", "path", path, "err", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), maxSpoolLine)
	n := 0
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.ID == "" {
			continue
		}
		select {
		case w.queue <- ev:
			d.opts.Metrics.queue(1)
			n++
		default:
			d.opts.Metrics.count(OutcomeDropped)
		}
	}
	if err := sc.Err(); err != nil {
		d.opts.Log.Warn("spooled webhook events were read in part", "path", path, "err", err)
	}
	if err := os.Remove(path); err != nil {
		d.opts.Log.Warn("the webhook spool file cannot be removed; its events may be sent again", "path", path, "err", err)
	}
	d.opts.Log.Info("spooled webhook events queued again", "url", w.ep.URL, "count", n)
}
