package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of a Log.
const (
	DefaultMaxFileBytes = 64 << 20 // a file is closed and a new one begun past this size
	DefaultRetention    = 100      // files kept (with the default size, at most 6.4 GB)
	// DefaultFlushDelay is how long a buffered record (an API request, a
	// read-level tool call) may stay written but not fsynced.
	DefaultFlushDelay = 200 * time.Millisecond
	// DefaultQueue is how many records may wait for the writer.
	DefaultQueue = 8192
	// DefaultEnqueueWait is how long a buffered record waits for room in a
	// full queue before it is dropped (and counted).
	DefaultEnqueueWait = 50 * time.Millisecond
	// DefaultDurableWait is how long a write or exec call's answer waits
	// for its record to be on disk.
	DefaultDurableWait = 5 * time.Second
	// maxBatch is the most records written (and fsynced) at once.
	maxBatch = 512
)

// ErrClosed is the error of an Append after Close.
var ErrClosed = errors.New("the audit record is closed (sandboxd is stopping)")

// Options configure a Log. Zero values take the defaults.
type Options struct {
	Dir          string // the directory of the files (DATA_DIR/audit)
	Replica      string // written into every record
	MaxFileBytes int64
	// Retention is how many files are kept: when a new file is begun and
	// there are more, the oldest are removed. 0 keeps every file.
	Retention   int
	FlushDelay  time.Duration
	Queue       int
	EnqueueWait time.Duration
	DurableWait time.Duration
	Metrics     *Metrics // nil: counted nowhere
	Logger      *slog.Logger
}

// Log appends records to files under one directory as one hash chain: a
// record's Prev is the SHA-256 of the line before it, the first record of
// a file links to the last of the file before, and a restart continues the
// chain of the newest file.
//
// Goroutines: one, the writer, started by Open and ended by Close. It alone
// owns the open file, the sequence and the chain: it numbers, links and
// writes the queued records in batches, fsyncs a batch that holds a record
// someone waits for (group commit) and the others within FlushDelay, begins
// a new file past MaxFileBytes and removes the oldest beyond Retention.
// Append and Query run on their callers' goroutines.
//
// Shutdown: Close refuses new records, lets the writer write and fsync
// every record already queued, closes the file and waits for the writer.
type Log struct {
	opt Options
	log *slog.Logger
	m   *Metrics

	in     chan item
	stop   chan struct{} // closed by Close: the writer drains in and ends
	exited chan struct{} // closed by the writer when it ended

	mu     sync.RWMutex // Append holds it shared while it queues; Close exclusively to refuse
	closed bool

	// Owned by the writer goroutine only.
	f     *os.File
	size  int64  // of f
	seq   uint64 // of the last record written
	prev  string // hex SHA-256 of the last line written
	dirty bool   // written since the last fsync
}

// item is one queued record, or a barrier (rec nil): done gets nil once
// everything queued before it is written.
type item struct {
	rec     *Record
	durable bool
	done    chan error // nil: nobody waits
}

// Open opens (or creates) the record in opt.Dir and starts its writer. A
// newest file that ends in a torn line (a crash mid-write) is cut back to
// its last whole line, which no caller was ever told was written.
func Open(opt Options) (*Log, error) {
	if opt.Dir == "" {
		return nil, errors.New("audit: no directory given")
	}
	if opt.MaxFileBytes <= 0 {
		opt.MaxFileBytes = DefaultMaxFileBytes
	}
	if opt.Retention < 0 {
		opt.Retention = 0
	}
	if opt.FlushDelay <= 0 {
		opt.FlushDelay = DefaultFlushDelay
	}
	if opt.Queue <= 0 {
		opt.Queue = DefaultQueue
	}
	if opt.EnqueueWait <= 0 {
		opt.EnqueueWait = DefaultEnqueueWait
	}
	if opt.DurableWait <= 0 {
		opt.DurableWait = DefaultDurableWait
	}
	l := &Log{opt: opt, log: opt.Logger, m: opt.Metrics, in: make(chan item, opt.Queue),
		stop: make(chan struct{}), exited: make(chan struct{})}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.m == nil {
		l.m = NewMetrics()
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("the audit directory %s cannot be created: %w; make the data dir writable", opt.Dir, err)
	}
	if err := l.recover(); err != nil {
		return nil, err
	}
	go l.run()
	return l, nil
}

// Dir is the directory the files are in.
func (l *Log) Dir() string { return l.opt.Dir }

// Append queues rec. With durable, it returns once rec is written and
// fsynced (or DurableWait passed: an error); otherwise once it is queued,
// waiting at most EnqueueWait for room, after which it is dropped and
// counted. Seq, Prev and Replica are the Log's to fill.
func (l *Log) Append(rec Record, durable bool) error {
	it := item{rec: &rec, durable: durable}
	wait := l.opt.EnqueueWait
	if durable {
		it.done = make(chan error, 1)
		wait = l.opt.DurableWait
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		l.m.dropped(dropClosed)
		return ErrClosed
	}
	select {
	case l.in <- it:
	case <-deadline.C:
		l.mu.RUnlock()
		l.m.dropped(dropQueueFull)
		return fmt.Errorf("the audit record's queue stayed full for %v; the record of this %s was dropped", wait, rec.Action)
	}
	l.mu.RUnlock()
	if !durable {
		return nil
	}
	select {
	case err := <-it.done:
		return err
	case <-deadline.C:
		l.m.lateDurable.Inc()
		return fmt.Errorf("the audit record of this %s was not on disk within %v; it is still queued", rec.Action, wait)
	}
}

// barrier returns once every record queued before it is written to its file
// (not necessarily fsynced), so that a Query sees it; or after deadline.
func (l *Log) barrier(deadline time.Duration) error {
	it := item{done: make(chan error, 1)}
	t := time.NewTimer(deadline)
	defer t.Stop()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil // the writer wrote everything on its way out
	}
	select {
	case l.in <- it:
	case <-t.C:
		l.mu.RUnlock()
		return errors.New("the audit record's queue is full")
	}
	l.mu.RUnlock()
	select {
	case err := <-it.done:
		return err
	case <-t.C:
		return errors.New("the audit record's writer is behind")
	}
}

// closeWait bounds how long Close waits for the writer (a disk that hangs
// in fsync must not hang the daemon's shutdown).
const closeWait = 10 * time.Second

// Close writes and fsyncs what is queued, closes the file and stops the
// writer, waiting at most closeWait. Appends after it fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.stop)
	}
	l.mu.Unlock()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-l.exited:
		return nil
	case <-t.C:
		return fmt.Errorf("the audit record's writer did not finish within %v (the disk of %s does not answer); records still queued may be lost", closeWait, l.opt.Dir)
	}
}

// run is the writer goroutine.
func (l *Log) run() {
	defer close(l.exited)
	var flush *time.Timer
	var flushC <-chan time.Time
	batch := make([]item, 0, maxBatch)
	var buf bytes.Buffer
	for {
		batch = batch[:0]
		select {
		case it := <-l.in:
			batch = append(batch, it)
		case <-flushC:
			flushC = nil
			l.fsync(nil)
			continue
		case <-l.stop:
			// Close refused new records before it signalled: what is
			// queued is all there will be.
			l.drainStopped(&buf)
			l.fsync(nil)
			if l.f != nil {
				l.f.Close()
				l.f = nil
			}
			return
		}
		// Take whatever else waits: one write, and at most one fsync, for
		// all of them.
	more:
		for len(batch) < maxBatch {
			select {
			case it := <-l.in:
				batch = append(batch, it)
			default:
				break more
			}
		}
		if l.write(batch, &buf) {
			l.fsync(batch)
			if flush != nil && flushC != nil {
				flush.Stop()
				flushC = nil
			}
		} else if l.dirty && flushC == nil {
			if flush == nil {
				flush = time.NewTimer(l.opt.FlushDelay)
			} else {
				flush.Reset(l.opt.FlushDelay)
			}
			flushC = flush.C
		}
		answerBarriers(batch)
	}
}

// answerBarriers tells the batch's barriers that everything before them
// is written.
func answerBarriers(batch []item) {
	for _, it := range batch {
		if it.rec == nil && it.done != nil {
			it.done <- nil
		}
	}
}

// drainStopped writes and fsyncs the records still queued at Close.
func (l *Log) drainStopped(buf *bytes.Buffer) {
	for len(l.in) > 0 {
		batch := make([]item, 0, maxBatch)
		for len(batch) < maxBatch && len(l.in) > 0 {
			batch = append(batch, <-l.in)
		}
		l.write(batch, buf)
		l.fsync(batch)
		answerBarriers(batch)
	}
}

// write numbers, links and writes the batch's records, and reports whether
// one of them is durable. A record that cannot be written is dropped: its
// waiter gets the error and the chain goes on from the last line written.
func (l *Log) write(batch []item, buf *bytes.Buffer) (durable bool) {
	buf.Reset()
	var pending []item // in buf, not yet in the file
	for _, it := range batch {
		if it.rec == nil {
			continue
		}
		if it.durable {
			durable = true
		}
		rec := it.rec
		rec.Seq = l.seq + 1
		rec.Prev = l.prev
		rec.Replica = l.opt.Replica
		if rec.Time.IsZero() {
			rec.Time = time.Now()
		}
		rec.Time = rec.Time.UTC()
		line, err := json.Marshal(rec)
		if err != nil {
			l.fail([]item{it}, fmt.Errorf("the audit record cannot be encoded: %w", err))
			continue
		}
		if l.f != nil && l.size+int64(buf.Len()+len(line)+1) > l.opt.MaxFileBytes && l.size+int64(buf.Len()) > 0 {
			if !l.flushBuf(buf, &pending) {
				l.fail([]item{it}, errors.New("the audit record could not be written: the write before it failed"))
				continue
			}
			l.rotate()
		}
		if l.f == nil {
			if err := l.create(rec.Seq); err != nil {
				l.fail(append(pending, it), err)
				pending = nil
				buf.Reset()
				continue
			}
		}
		buf.Write(line)
		buf.WriteByte('\n')
		pending = append(pending, it)
		l.seq = rec.Seq
		l.prev = Digest(line)
	}
	l.flushBuf(buf, &pending)
	return durable
}

// flushBuf writes buf to the file in one write. On an error the file is
// cut back to its last whole line and the chain rewinds to it.
func (l *Log) flushBuf(buf *bytes.Buffer, pending *[]item) bool {
	if buf.Len() == 0 {
		return true
	}
	n, err := l.f.Write(buf.Bytes())
	if err != nil {
		l.f.Truncate(l.size)
		l.rewind(*pending)
		l.fail(*pending, fmt.Errorf("the audit record could not be written to %s: %w", l.f.Name(), err))
		*pending = nil
		buf.Reset()
		return false
	}
	l.size += int64(n)
	l.dirty = true
	for _, it := range *pending {
		l.m.written(it.rec.Kind)
	}
	l.m.bytes.Add(float64(n))
	*pending = nil
	buf.Reset()
	return true
}

// rewind puts the chain back to before the first of the records not written.
func (l *Log) rewind(lost []item) {
	if len(lost) == 0 {
		return
	}
	first := lost[0].rec
	l.seq = first.Seq - 1
	l.prev = first.Prev
}

// fail tells the records' waiters err and counts the records dropped.
func (l *Log) fail(items []item, err error) {
	l.log.Error("audit record not written", "err", err, "records", len(items))
	for _, it := range items {
		if it.rec == nil {
			continue
		}
		l.m.dropped(dropWriteError)
		if it.done != nil {
			it.done <- err
		}
		it.rec.Seq = 0 // answered: fsync skips it
	}
}

// fsync makes what was written durable and answers the batch's waiters.
func (l *Log) fsync(batch []item) {
	var err error
	if l.dirty && l.f != nil {
		err = l.f.Sync()
		l.m.fsyncs.Inc()
		if err != nil {
			l.log.Error("audit record fsync failed", "file", l.f.Name(), "err", err)
			err = fmt.Errorf("the audit record could not be synced to disk: %w", err)
		} else {
			l.dirty = false
		}
	}
	for _, it := range batch {
		if it.rec != nil && it.done != nil && it.rec.Seq != 0 {
			it.done <- err
		}
	}
}

// rotate fsyncs and closes the current file, and removes the oldest files
// beyond the retention; the next record begins a new file.
func (l *Log) rotate() {
	if l.f == nil {
		return
	}
	if l.dirty {
		if err := l.f.Sync(); err != nil {
			l.log.Error("audit record fsync failed", "file", l.f.Name(), "err", err)
		}
		l.m.fsyncs.Inc()
		l.dirty = false
	}
	l.f.Close()
	l.f = nil
	l.size = 0
}

// create begins the file whose first record is seq, and applies the
// retention.
func (l *Log) create(seq uint64) error {
	name := filepath.Join(l.opt.Dir, FileName(seq))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("the audit file %s cannot be created: %w", name, err)
	}
	// The new name must survive a crash as its records do.
	if d, err := os.Open(l.opt.Dir); err == nil {
		d.Sync()
		d.Close()
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	l.prune()
	return nil
}

// prune removes the oldest files beyond the retention. Verify accepts
// whatever Prev the first kept record has, so what is kept still verifies.
func (l *Log) prune() {
	if l.opt.Retention <= 0 {
		return
	}
	files, err := listFiles(l.opt.Dir)
	if err != nil {
		return
	}
	for len(files) > l.opt.Retention {
		p := filepath.Join(l.opt.Dir, files[0].name)
		if l.f != nil && p == l.f.Name() {
			return
		}
		if err := os.Remove(p); err != nil {
			l.log.Warn("an old audit file could not be removed", "file", p, "err", err)
			return
		}
		l.log.Info("old audit file removed (audit.retention)", "file", p)
		files = files[1:]
	}
}

// recover finds where the chain stands: the last whole line of the newest
// file. A torn last line is cut off; a newest file with no whole line is
// removed and the one before it read.
func (l *Log) recover() error {
	files, err := listFiles(l.opt.Dir)
	if err != nil {
		return fmt.Errorf("the audit directory %s cannot be read: %w", l.opt.Dir, err)
	}
	for i := len(files) - 1; i >= 0; i-- {
		p := filepath.Join(l.opt.Dir, files[i].name)
		off, data, err := readTail(p)
		if err != nil {
			return err
		}
		whole := bytes.LastIndexByte(data, '\n') + 1
		if off > 0 && whole == 0 {
			return fmt.Errorf("the audit file %s has no line end in its last %d bytes, so it is not an audit file; move it out of %s and start again", p, len(data), l.opt.Dir)
		}
		if whole < len(data) {
			l.log.Warn("the newest audit file ends in a torn line (a crash while writing); it is cut back to its last whole line",
				"file", p, "bytes_cut", len(data)-whole)
			if err := os.Truncate(p, off+int64(whole)); err != nil {
				return fmt.Errorf("the torn last line of the audit file %s cannot be cut off: %w", p, err)
			}
			data = data[:whole]
		}
		if whole == 0 {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("the empty audit file %s cannot be removed: %w", p, err)
			}
			continue
		}
		start := bytes.LastIndexByte(data[:whole-1], '\n') + 1
		if start == 0 && off > 0 {
			return fmt.Errorf("the last line of the audit file %s is longer than %d bytes, so it is not an audit record; move the file out of %s and start again", p, maxLine, l.opt.Dir)
		}
		last := data[start : whole-1]
		var h struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(last, &h); err != nil || h.Seq == 0 {
			return fmt.Errorf("the last record of the audit file %s cannot be read, so the chain cannot go on from it; run `sandboxd audit verify %s`, move the damaged file out of the directory, and start again", p, l.opt.Dir)
		}
		l.seq, l.prev = h.Seq, Digest(last)
		if off+int64(whole) < l.opt.MaxFileBytes {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return fmt.Errorf("the audit file %s cannot be opened for appending: %w", p, err)
			}
			l.f, l.size = f, off+int64(whole)
		}
		return nil
	}
	return nil
}

// readTail reads the end of a file, enough for its last whole line and a
// torn one after it: off is where data begins.
func readTail(p string) (off int64, data []byte, err error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, nil, fmt.Errorf("the audit file %s cannot be read: %w", p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("the audit file %s cannot be read: %w", p, err)
	}
	off = max(0, st.Size()-2*maxLine)
	data = make([]byte, st.Size()-off)
	if _, err := f.ReadAt(data, off); err != nil {
		return 0, nil, fmt.Errorf("the audit file %s cannot be read: %w", p, err)
	}
	return off, data, nil
}

// FileName is the name of the file whose first record is seq: names sort
// in the chain's order.
func FileName(seq uint64) string { return fmt.Sprintf("audit-%020d.jsonl", seq) }

type file struct {
	name  string
	first uint64 // the seq in its name
}

// listFiles lists the record's files in chain order; other names are
// ignored.
func listFiles(dir string) ([]file, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []file
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, "audit-") || !strings.HasSuffix(n, ".jsonl") {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(n, "audit-"), ".jsonl"), 10, 64)
		if err != nil {
			continue
		}
		out = append(out, file{name: n, first: seq})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}
