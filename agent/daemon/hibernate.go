package daemon

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// A hibernation (proto.SignalHibernate) stops every process of the sandbox
// and keeps its files. The agent writes, into its state dir, a record of
// the processes it owns that still run: the long-lived ones with the
// newest of their output, and the spawned ones (kernels, language
// servers); then it kills them as on SIGTERM. The daemon started at the
// wake loads the record once (RestoreHibernation), removes it, and reports
// each of them as stopped by the hibernation, so that a caller tells "the
// sandbox slept" from "the process died" and never gets an id back for
// another process. The record is on the sandbox's own file system (the
// state dir; by default /tmp/.sandboxd-agent/journal, which no backend
// mounts a tmpfs over), so it lives as long as the container does.

const (
	// hibernationFile is the record in the state dir: JSON lines, a header
	// first and an end line last (hibernationLine), each chunk line
	// followed by the chunk's bytes as they are (no encoding to undo at
	// the wake, where a resume waits for it).
	hibernationFile = "hibernation.json"
	// hibernationVersion is the record's format.
	hibernationVersion = 1
	// hibernationOutput is the output kept across a hibernation, shared by
	// the long-lived processes (the newest bytes of each): what the
	// agent can write in well under a second before the engine's patience
	// runs out, and read back at the wake without a large allocation.
	hibernationOutput = 16 << 20
	// hibernationPiece bounds one chunk of the record, so neither writing
	// nor reading it holds more than this at once beyond the rings.
	hibernationPiece = 256 << 10
	// hibernationLineMax bounds one JSON line of the record (a process's
	// argv is the longest part; a request frame bounds it too).
	hibernationLineMax = proto.MaxFrame
)

// hibernationLine is one line of the record: the header (Version, At),
// a long-lived process (Proc) followed by its output's chunks (Chunk, each
// line followed by its Size bytes), in order and without gaps, a spawned
// process (Spawned), or the end (End), without which the record is not
// whole.
type hibernationLine struct {
	Version int                `json:"version,omitempty"`
	At      time.Time          `json:"at,omitzero"`
	Proc    *proto.ProcInfo    `json:"proc,omitempty"`
	Chunk   *hibernationChunk  `json:"chunk,omitempty"`
	Spawned *proto.ProcessInfo `json:"spawned,omitempty"`
	End     bool               `json:"end,omitempty"`
}

// hibernationChunk is a chunk of output whose Size bytes follow its line.
type hibernationChunk struct {
	Stream string `json:"stream"`
	Offset int64  `json:"offset"`
	Size   int    `json:"size"`
}

// Hibernate is the agent's side of a hibernation: it stops taking
// commands, records every process it owns that still runs (and those an
// earlier hibernation stopped that are still listed) in the state dir,
// durably, then closes the Server as Close does, which kills them. The
// error says what could not be recorded; the processes are killed and the
// Server closed whatever it is.
func (s *Server) Hibernate() error {
	s.procs.stop()
	rerr := s.procs.recordHibernation(s.opts.stateDir, time.Now())
	if rerr != nil {
		rerr = fmt.Errorf("the processes stopped by this hibernation were not recorded, so the agent that starts at the wake cannot report them: %w", rerr)
	}
	return errors.Join(rerr, s.Close())
}

// RestoreHibernation loads the record a hibernation left in the state dir
// (WithStateDir), if any, and removes it: its processes are listed from
// now on as stopped by the hibernation. Call it at start, holding the
// daemon lock (as RecoverCommits), before serving: a second daemon that
// starts beside the one that serves must not consume the record.
func (s *Server) RestoreHibernation() error {
	return s.procs.restoreHibernation(s.opts.stateDir, time.Now())
}

// errStoppedByHibernation refuses what needs a process that a hibernation
// stopped.
func errStoppedByHibernation(id string) error {
	return errdefs.FailedPrecondition("process %s was stopped when the sandbox hibernated; nothing of it runs any more: start it again if it is still needed", id)
}

// recordHibernation writes the record of the processes that run (or were
// stopped by an earlier hibernation and are still listed) into dir. No
// process starts once it has begun (stop was called, and the long table
// is closed).
func (ps *processService) recordHibernation(dir string, at time.Time) error {
	longs := ps.long.forHibernation()
	spawned := ps.table.forHibernation()
	if dir == "" {
		if len(longs)+len(spawned) == 0 {
			return nil
		}
		return errors.New("the agent has no state dir")
	}
	path := filepath.Join(dir, hibernationFile)
	ps.hibMu.Lock()
	restored := ps.hibRestored
	ps.hibMu.Unlock()
	if !restored {
		// The record of an earlier hibernation was not loaded yet (a
		// hibernation before serving): nothing ran since, so it is
		// still the truth, and writing over it would lose it.
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	sizes := make([]int64, len(longs))
	for i, p := range longs {
		start, end, _ := p.ring.bounds()
		sizes[i] = end - start
	}
	budgets := shareOutput(sizes, hibernationOutput)
	return writeDurableFunc(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		if err := enc.Encode(hibernationLine{Version: hibernationVersion, At: at}); err != nil {
			return err
		}
		for i, p := range longs {
			if err := recordLong(w, enc, p, budgets[i]); err != nil {
				return err
			}
		}
		for _, p := range spawned {
			info := p.snapshot()
			if err := enc.Encode(hibernationLine{Spawned: &info}); err != nil {
				return err
			}
		}
		return enc.Encode(hibernationLine{End: true})
	})
}

// recordLong writes p and the newest budget bytes of its output, read from
// its ring a piece at a time (it may still be writing: what it writes
// after the snapshot is not kept).
func recordLong(w io.Writer, enc *json.Encoder, p *longProc, budget int64) error {
	info := p.snapshot()
	if err := enc.Encode(hibernationLine{Proc: &info}); err != nil {
		return err
	}
	to := info.Output
	for cursor := max(info.RingStart, to-budget); cursor < to; {
		rd := p.ring.read(cursor, int(min(to-cursor, hibernationPiece)))
		if len(rd.chunks) == 0 {
			return nil
		}
		for _, c := range rd.chunks {
			if err := enc.Encode(hibernationLine{Chunk: &hibernationChunk{Stream: c.Stream, Offset: c.Offset, Size: len(c.Data)}}); err != nil {
				return err
			}
			if _, err := w.Write(c.Data); err != nil {
				return err
			}
		}
		cursor = rd.next
	}
	return nil
}

// shareOutput divides budget between outputs of the given sizes: each gets
// all of its own up to an equal share of what the smaller ones left.
func shareOutput(sizes []int64, budget int64) []int64 {
	idx := make([]int, len(sizes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(sizes[a], sizes[b]) })
	out := make([]int64, len(sizes))
	left := budget
	for k, i := range idx {
		out[i] = min(sizes[i], left/int64(len(idx)-k))
		left -= out[i]
	}
	return out
}

// forHibernation closes the table to new starts and returns the processes
// a hibernation records: those running, and those an earlier hibernation
// stopped that are still kept.
func (t *longTable) forHibernation() []*longProc {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	var out []*longProc
	for _, p := range t.order {
		if p.hibernated || !p.ended() {
			out = append(out, p)
		}
	}
	return out
}

// forHibernation returns the spawned processes a hibernation records:
// those running, and those an earlier hibernation stopped that are kept.
func (t *procTable) forHibernation() []*process {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*process
	for _, p := range t.order {
		if p.hibernated || p.running() {
			out = append(out, p)
		}
	}
	return out
}

// restoredLong is a long-lived process as the record has it.
type restoredLong struct {
	info   proto.ProcInfo
	chunks []proto.ProcChunk
}

// restoreHibernation loads the record in dir into the tables and removes
// it; a record it cannot read is logged and removed too, since it would
// fail the same way at every start.
func (ps *processService) restoreHibernation(dir string, now time.Time) error {
	ps.hibMu.Lock()
	defer ps.hibMu.Unlock()
	ps.hibRestored = true
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, hibernationFile)
	at, longs, spawned, err := readHibernation(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		ps.long.restore(longs, at, now)
		ps.table.restore(spawned, at, now)
	}
	if rerr := os.Remove(path); rerr == nil {
		rerr = syncDir(dir)
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("the hibernation record was removed but the removal may not last: %w", rerr))
		}
	} else {
		err = errors.Join(err, fmt.Errorf("the hibernation record could not be removed, so a restart would report its processes again: %w", rerr))
	}
	return err
}

// readHibernation reads a record whole, or fails saying why.
func readHibernation(path string) (at time.Time, longs []restoredLong, spawned []proto.ProcessInfo, err error) {
	f, err := os.Open(path)
	if err != nil {
		return at, nil, nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var head hibernationLine
	if err := readHibernationLine(br, &head); err != nil {
		return at, nil, nil, fmt.Errorf("the hibernation record %s has no readable header: %w", path, err)
	}
	if head.Version != hibernationVersion || head.At.IsZero() {
		return at, nil, nil, fmt.Errorf("the hibernation record %s is of version %d, not %d, or has no time", path, head.Version, hibernationVersion)
	}
	var kept int64
	for {
		var l hibernationLine
		if err := readHibernationLine(br, &l); err != nil {
			return at, nil, nil, fmt.Errorf("the hibernation record %s ends before its end line: %w", path, err)
		}
		switch {
		case l.End:
			return head.At, longs, spawned, nil
		case l.Proc != nil:
			longs = append(longs, restoredLong{info: *l.Proc})
		case l.Chunk != nil:
			if len(longs) == 0 || l.Chunk.Size <= 0 || l.Chunk.Size > hibernationPiece {
				return at, nil, nil, fmt.Errorf("the hibernation record %s has a chunk of %d bytes where none can be", path, l.Chunk.Size)
			}
			data := make([]byte, l.Chunk.Size)
			if _, err := io.ReadFull(br, data); err != nil {
				return at, nil, nil, fmt.Errorf("the hibernation record %s ends inside a chunk: %w", path, err)
			}
			c := proto.ProcChunk{Stream: l.Chunk.Stream, Offset: l.Chunk.Offset, Data: data}
			cur := &longs[len(longs)-1]
			kept += int64(len(data))
			switch {
			case kept > 2*hibernationOutput:
				// More than any agent writes: keep the record's
				// processes, not its excess.
			case len(cur.chunks) > 0 && chunkEnd(cur.chunks[len(cur.chunks)-1]) != c.Offset:
				// A gap: keep the newest run without one.
				cur.chunks = []proto.ProcChunk{c}
			default:
				cur.chunks = append(cur.chunks, c)
			}
		case l.Spawned != nil:
			spawned = append(spawned, *l.Spawned)
		}
	}
}

// readHibernationLine decodes the record's next JSON line into l.
func readHibernationLine(br *bufio.Reader, l *hibernationLine) error {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		if len(line) > hibernationLineMax {
			return fmt.Errorf("a line longer than %d bytes", hibernationLineMax)
		}
	}
	return json.Unmarshal(line, l)
}

func chunkEnd(c proto.ProcChunk) int64 { return c.Offset + int64(len(c.Data)) }

// restore puts the recorded processes before the table's own, ended, with
// the output kept; the id counter moves past every recorded id.
func (t *longTable) restore(recs []restoredLong, at, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var restored []*longProc
	for _, r := range recs {
		n, ok := longIDNumber(r.info.ID)
		if !ok || t.byID[r.info.ID] != nil {
			t.log.Warn("a process in the hibernation record has no usable id; it is not listed", "id", r.info.ID)
			continue
		}
		t.next = max(t.next, n+1)
		ring := r.info.RingBytes
		if ring <= 0 {
			ring = proto.DefaultProcRing
		}
		p := &longProc{
			info: proto.ProcInfo{ID: r.info.ID, PID: r.info.PID, Argv: r.info.Argv, Dir: r.info.Dir, User: r.info.User, Labels: r.info.Labels,
				StartedAt: r.info.StartedAt, RingBytes: ring},
			ring:       restoredRing(ring, r.chunks, r.info.Output),
			done:       make(chan struct{}),
			hibernated: true,
			keptSince:  now,
			inClosed:   true,
		}
		close(p.done)
		if r.info.Pty != nil {
			p.size = *r.info.Pty
		}
		p.status = proto.ProcInfo{State: proto.ProcStopped, Hibernated: true, ExitedAt: at}
		if r.info.Hibernated && !r.info.ExitedAt.IsZero() {
			p.status.ExitedAt = r.info.ExitedAt // stopped by an earlier hibernation
		}
		restored = append(restored, p)
		t.byID[p.info.ID] = p
	}
	t.order = append(restored, t.order...)
}

// longIDNumber is n of an id "pN".
func longIDNumber(id string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "p"))
	return n, err == nil && strings.HasPrefix(id, "p") && n > 0
}

// restoredRing is a closed ring holding chunks (in order, without gaps);
// without chunks it is empty at end, so a reader from 0 is told that
// every byte before end was lost.
func restoredRing(size int64, chunks []proto.ProcChunk, end int64) *outRing {
	r := newOutRing(size)
	r.start, r.end = end, end
	if len(chunks) > 0 {
		r.start, r.end = chunks[0].Offset, chunks[0].Offset
	}
	for _, c := range chunks {
		for data := c.Data; len(data) > 0; {
			n := min(len(data), ringChunkMax)
			// The ring is closed, so nothing is ever appended to a
			// piece: the pieces may share the decoded buffer.
			rc := ringChunk{stream: c.Stream, off: r.end, data: data[:n:n], cost: int64(n) + ringChunkCost}
			r.chunks = append(r.chunks, rc)
			r.used += rc.cost
			r.end += int64(n)
			data = data[n:]
		}
	}
	r.closed = true
	return r
}

// restore puts the recorded spawned processes before the table's own,
// ended and without output.
func (t *procTable) restore(infos []proto.ProcessInfo, at, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var restored []*process
	for _, info := range infos {
		if info.ID == "" || t.byID[info.ID] != nil {
			continue
		}
		p := &process{
			info: proto.ProcessInfo{ID: info.ID, Name: info.Name, PID: info.PID, Argv: info.Argv, Labels: info.Labels,
				StartedAt: info.StartedAt},
			outs:       map[string]*outPort{},
			ins:        map[string]*inPort{},
			done:       make(chan struct{}),
			hibernated: true,
			keptSince:  now,
		}
		close(p.done)
		p.status = proto.ProcessInfo{Hibernated: true, ExitedAt: at}
		if info.Hibernated && !info.ExitedAt.IsZero() {
			p.status.ExitedAt = info.ExitedAt
		}
		restored = append(restored, p)
		t.byID[p.info.ID] = p
	}
	t.order = append(restored, t.order...)
}
