package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

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

// runFile is the file's content.
type runFile struct {
	Version int        `json:"version"`
	Runs    []savedRun `json:"runs"`
	Saved   time.Time  `json:"saved"`
}

type savedRun struct {
	ID           string `json:"id"`
	Tenant       string `json:"tenant"`
	Conversation string `json:"conversation"`
	Surface      string `json:"surface"`
	Workdir      string `json:"workdir,omitempty"`
	Space        string `json:"space,omitempty"`
	Approval     string `json:"approval,omitempty"`
	Vibe         bool   `json:"vibe,omitempty"`
}

// Load reads the run file into the store and returns how many runs it
// restored; each is as fresh as a run just used (its TTL starts again). A
// missing file is no error. An unreadable or foreign file is renamed to
// path+".bad" and reported; the store then starts empty.
func (s *RunStore) Load() (int, error) {
	if s.file == "" {
		return 0, nil
	}
	f, err := os.Open(s.file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("the run file %s cannot be read: %w", s.file, err)
	}
	var rf runFile
	derr := json.NewDecoder(&limitedReader{r: f, n: maxRunFile}).Decode(&rf)
	f.Close()
	if derr == nil && rf.Version != runFileVersion {
		derr = fmt.Errorf("version %d, this sandboxd reads %d", rf.Version, runFileVersion)
	}
	if derr != nil {
		bad := s.file + ".bad"
		_ = os.Rename(s.file, bad)
		return 0, fmt.Errorf("the run file %s is not usable (%v); it was moved to %s and no run was restored", s.file, derr, bad)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range rf.Runs {
		if r.ID == "" || r.Tenant == "" || s.runs[r.ID] != nil || s.perTenant[r.Tenant] >= s.max {
			continue
		}
		s.runs[r.ID] = &runEntry{lastUsed: now, run: tools.Run{ID: r.ID, Tenant: r.Tenant, Conversation: r.Conversation,
			Surface: r.Surface, Workdir: r.Workdir, Space: r.Space, Approval: r.Approval, Vibe: r.Vibe}}
		s.perTenant[r.Tenant]++
		n++
	}
	return n, nil
}

// saveLocked rewrites the run file with the live top-level runs (temporary
// file, fsync, rename). A failure is returned for the caller to log: the
// runs stay served from memory.
func (s *RunStore) saveLocked() error {
	if s.file == "" {
		return nil
	}
	rf := runFile{Version: runFileVersion, Runs: []savedRun{}, Saved: s.now().UTC()}
	for _, e := range s.runs {
		r := e.run
		if r.Parent != "" {
			continue
		}
		rf.Runs = append(rf.Runs, savedRun{ID: r.ID, Tenant: r.Tenant, Conversation: r.Conversation,
			Surface: r.Surface, Workdir: r.Workdir, Space: r.Space, Approval: r.Approval, Vibe: r.Vibe})
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

// limitedReader fails past n bytes instead of truncating silently.
type limitedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("the file is larger than %d bytes", maxRunFile)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
