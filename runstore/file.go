package runstore

import (
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

// This file keeps top-level runs beyond memory in the run file, for one
// sandboxd; records.go keeps them in run records, for replicas of one
// deployment.

// runFileVersion is the layout of the run file; a file of another version
// is set aside, not misread.
const runFileVersion = 1

// maxRunFile bounds the run file read at start (a tenant holds at most
// DefaultMaxPerTenant runs of a few hundred bytes each).
const maxRunFile = 64 << 20

// WithFile keeps the top-level runs in path, so that a restarted
// sandboxd serves the same run ids (their sandboxes, kernels and servers
// live on in the sandbox agent). The file is rewritten atomically when a
// run is created or ends; onErr hears of a write that failed (the runs are
// still served from memory). Child runs of workers are not kept: their
// workers do not outlive sandboxd. Load reads it.
func WithFile(path string, onErr func(error)) Option {
	return func(s *Store) { s.file, s.onSaveErr = path, onErr }
}

// flushLocked writes the run file when a top-level run came or went.
func (s *Store) flushLocked() {
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
func (s *Store) Load() (int, error) {
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
func (s *Store) saveLocked() error {
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
