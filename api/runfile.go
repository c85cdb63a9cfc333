package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

// This file keeps top-level runs beyond memory: in the run file (one
// sandboxd) or in run records (replicas of one deployment).

// runFileVersion is the layout of the run file; a file of another version
// is set aside, not misread.
const runFileVersion = 1

// maxRunFile bounds the run file read at start (a tenant holds at most
// MaxRunsPerTenant runs of a few hundred bytes each).
const maxRunFile = 64 << 20

// WithRunFile keeps the top-level runs in path, so that a restarted
// sandboxd serves the same run ids (their sandboxes, kernels and servers
// live on in the sandbox agent). The file is rewritten atomically when a
// run is created or ends; onErr hears of a write that failed (the runs are
// still served from memory). Child runs of workers are not kept: their
// workers do not outlive sandboxd. Load reads it.
func WithRunFile(path string, onErr func(error)) RunOption {
	return func(s *RunStore) { s.file, s.onSaveErr = path, onErr }
}

// flushLocked writes the run file when a top-level run came or went.
func (s *RunStore) flushLocked() {
	if !s.dirty {
		return
	}
	s.dirty = false
	if err := s.saveLocked(); err != nil && s.onSaveErr != nil {
		s.onSaveErr(err)
	}
}

// runFile is the file's content: the top-level runs as the store holds
// them.
type runFile struct {
	Version int         `json:"version"`
	Runs    []tools.Run `json:"runs"`
	Saved   time.Time   `json:"saved"`
}

// Load reads the run file into the store and returns how many runs it
// restored; each is as fresh as a run just used (its TTL starts again). A
// missing file is no error. An unreadable or foreign file is renamed to
// path+".bad" and reported; the store then starts empty.
func (s *RunStore) Load() (int, error) {
	if s.file == "" { // also with records: they are the store
		return 0, nil
	}
	f, err := os.Open(s.file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("the run file %s cannot be read: %w", s.file, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRunFile+1))
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("the run file %s cannot be read: %w", s.file, err)
	}
	rf, derr := parseRunFile(data)
	if derr != nil {
		bad := s.file + ".bad"
		_ = os.Rename(s.file, bad)
		return 0, fmt.Errorf("the run file %s is not usable (%v); it was moved to %s and no run was restored", s.file, derr, bad)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n, dirty := 0, s.dirty
	defer func() { s.dirty = dirty }() // the file holds what was just read
	for _, r := range rf.Runs {
		if r.ID == "" || r.Tenant == "" || r.Parent != "" || s.runs[r.ID] != nil || s.perTenant[r.Tenant] >= s.max {
			continue
		}
		s.insertLocked(r, now)
		n++
	}
	return n, nil
}

// parseRunFile reads a run file of this sandboxd's version.
func parseRunFile(data []byte) (runFile, error) {
	var rf runFile
	if len(data) > maxRunFile {
		return rf, fmt.Errorf("it is larger than %d bytes", maxRunFile)
	}
	if err := json.Unmarshal(data, &rf); err != nil {
		return rf, err
	}
	if rf.Version != runFileVersion {
		return rf, fmt.Errorf("version %d, this sandboxd reads %d", rf.Version, runFileVersion)
	}
	return rf, nil
}

// saveLocked rewrites the run file with the live top-level runs (temporary
// file, fsync, rename). A failure is returned for the caller to log: the
// runs stay served from memory.
func (s *RunStore) saveLocked() error {
	if s.file == "" {
		return nil
	}
	rf := runFile{Version: runFileVersion, Runs: []tools.Run{}, Saved: s.now().UTC()}
	for _, e := range s.runs {
		if e.run.Parent == "" {
			rf.Runs = append(rf.Runs, e.run)
		}
	}
	data, err := json.Marshal(rf)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.file), "."+filepath.Base(s.file)+".*")
	if err != nil {
		return fmt.Errorf("the run file cannot be written: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), s.file)
	}
	if werr != nil {
		return fmt.Errorf("the run file %s cannot be written: %w", s.file, werr)
	}
	return nil
}

// RunRecords keeps the top-level runs of every replica of a deployment, so
// that any replica serves a run another one created and runs outlive the
// replica that created them. List and Count answer from what the records
// hold at hand (a cache) and never block on the network; Get may ask
// further (a run created a moment ago elsewhere).
type RunRecords interface {
	// Put stores run under run.ID, replacing a record of the same id.
	Put(ctx context.Context, run tools.Run) error
	// Remove deletes the record of id; a missing record is no error.
	Remove(ctx context.Context, id string) error
	// Get returns the record of id; a missing one is false and no error.
	Get(ctx context.Context, id string) (tools.Run, bool, error)
	// List returns the tenant's recorded runs, in no particular order.
	List(tenant string) []tools.Run
	// Count is len(List(tenant)) without building the list.
	Count(tenant string) int
}

// WithRunRecords keeps the top-level runs in r as well as in memory, for
// replicas: Create puts a run there before returning it, Get and Delete of
// a run that is not in memory look there (Get then keeps it in memory),
// List adds the tenant's recorded runs, and the per-tenant limit counts
// them. A run that ends here (deleted, expired) has its record removed;
// onErr hears of a removal that failed (the run stays ended here and the
// removal is retried). Child runs stay in memory only, as their workers do.
// The run file is not used with records.
func WithRunRecords(r RunRecords, onErr func(error)) RunOption {
	return func(s *RunStore) { s.records, s.onRecordErr = r, onErr }
}

// Bounds of the ids of ended runs that are hidden from the records.
const (
	maxTombs         = 4096             // at most this many ended ids are kept
	tombLinger       = time.Minute      // a removed record may linger this long in a records cache
	removeRetryEvery = 30 * time.Second // failed removals are retried this often at most
	removeRetryBatch = 16               // and this many at a time
)

// tomb is a top-level run that ended here. Until its record is removed,
// and a while after (a records cache lags its own deletes), the records'
// copy is never served, counted as adoptable or listed by this store.
type tomb struct {
	at      time.Time // when it ended, or when its record was removed
	removed bool      // its record is gone
}

// buryLocked hides id from the records; removed says its record is gone.
func (s *RunStore) buryLocked(id string, removed bool) {
	if len(s.tombs) >= maxTombs {
		s.pruneTombsLocked(s.now())
	}
	if len(s.tombs) >= maxTombs { // all pending: forget the oldest
		oldest := ""
		for tid, t := range s.tombs {
			if oldest == "" || t.at.Before(s.tombs[oldest].at) {
				oldest = tid
			}
		}
		delete(s.tombs, oldest)
	}
	s.tombs[id] = tomb{at: s.now(), removed: removed}
}

// pruneTombsLocked forgets removed records once their linger is over.
func (s *RunStore) pruneTombsLocked(now time.Time) {
	for id, t := range s.tombs {
		if t.removed && now.Sub(t.at) >= tombLinger {
			delete(s.tombs, id)
		}
	}
}

// hiddenLocked reports whether id ended here and its record is not to be
// served.
func (s *RunStore) hiddenLocked(id string, now time.Time) bool {
	t, ok := s.tombs[id]
	return ok && (!t.removed || now.Sub(t.at) < tombLinger)
}

// removeRecord removes the record of an ended run, outside the lock.
func (s *RunStore) removeRecord(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.recTimeout)
	err := s.records.Remove(ctx, id)
	cancel()
	s.mu.Lock()
	if _, ok := s.tombs[id]; ok && err == nil {
		s.tombs[id] = tomb{at: s.now(), removed: true}
	}
	s.mu.Unlock()
	if err != nil && s.onRecordErr != nil {
		s.onRecordErr(fmt.Errorf("the record of the ended run %s cannot be removed (this replica no longer serves the run; the removal is retried): %w", id, err))
	}
}

// maybeRetry starts a retry of failed removals when one is due.
func (s *RunStore) maybeRetry() {
	if s.records == nil {
		return
	}
	now := s.now()
	s.mu.Lock()
	var ids []string
	if !s.retrying && now.Sub(s.lastRetry) >= removeRetryEvery {
		for id, t := range s.tombs {
			if !t.removed && now.Sub(t.at) >= removeRetryEvery {
				ids = append(ids, id)
				if len(ids) == removeRetryBatch {
					break
				}
			}
		}
	}
	if len(ids) > 0 {
		s.retrying, s.lastRetry = true, now
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	go func() {
		for _, id := range ids {
			s.removeRecord(id)
		}
		s.mu.Lock()
		s.retrying = false
		s.mu.Unlock()
	}()
}
