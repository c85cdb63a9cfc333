// Package changeset is the one compare-and-swap write of the tools that
// change several files of a workspace at once (apply_patch, edit,
// lsp_rename, resolve). A Set loads each file and records the hash of its
// content as read; the tool changes the files in memory, as often as it
// likes; Commit then hands every change to the sandbox agent in one
// write_files request that carries the hashes. The agent checks each file
// still holds what was read and writes all of them or none, so a file
// changed behind the tool's back fails the whole set with the agent's own
// error message ("... changed since it was read ...; read it again before
// writing") and nothing is written.
package changeset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Agent is what a Set needs of the sandbox agent.
type Agent interface {
	ReadFile(ctx context.Context, r *proto.ReadFileRequest) (*proto.ReadFileResponse, error)
	ReadFiles(ctx context.Context, r *proto.ReadFilesRequest) (*proto.ReadFilesResponse, error)
	WriteFiles(ctx context.Context, r *proto.WriteFilesRequest) error
}

var _ Agent = (*agent.Client)(nil)

// Limits caps what a Set reads; zero leaves a cap to the agent's default.
type Limits struct {
	FileBytes  int64 // largest file loaded
	TotalBytes int64 // all files of one LoadAll or Stale together
}

// notFound is the agent's reason for a path of a batch read that does not
// exist (agent/daemon readOne).
const notFound = "not found"

// Set is one planned write. It lives for one tool call and is not safe for
// concurrent use.
type Set struct {
	agent Agent
	root  string
	lim   Limits
	files map[string]*File
	order []*File // load order, which is the order of the write
}

// New returns an empty set over the workspace root.
func New(a Agent, root string, lim Limits) *Set {
	return &Set{agent: a, root: root, lim: lim, files: map[string]*File{}}
}

// TooLargeError says a file is larger than Limits.FileBytes, so it cannot
// be changed in memory. Tools word it themselves, naming their own limit.
type TooLargeError struct {
	Path  string
	Size  int64 // the file's full length
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s has %d bytes, more than the %d bytes a change can load", e.Path, e.Size, e.Limit)
}

// Load reads one file into the set, or returns the file already loaded
// under that path. A missing file is the agent's error (errdefs.ErrNotFound),
// as every error of the read is, unchanged; a file over Limits.FileBytes is
// a *TooLargeError.
func (s *Set) Load(ctx context.Context, path string) (*File, error) {
	return s.load(ctx, path, false)
}

// LoadOrAbsent is Load for a path that may not exist yet: a missing file
// is loaded as absent, and a write to it expects it still absent.
func (s *Set) LoadOrAbsent(ctx context.Context, path string) (*File, error) {
	return s.load(ctx, path, true)
}

func (s *Set) load(ctx context.Context, path string, absentOK bool) (*File, error) {
	if f := s.files[path]; f != nil {
		return f, nil
	}
	r, err := s.agent.ReadFile(ctx, &proto.ReadFileRequest{Root: s.root, Path: path, MaxBytes: s.lim.FileBytes})
	switch {
	case absentOK && errors.Is(err, errdefs.ErrNotFound):
		return s.add(path, false, nil), nil
	case err != nil:
		return nil, err
	case r.Truncated:
		return nil, &TooLargeError{Path: path, Size: r.Size, Limit: s.lim.FileBytes}
	}
	return s.add(path, true, r.Data), nil
}

// LoadAll reads the files of paths not yet in the set in one round trip.
// A file the agent does not return (missing, over a limit, not a regular
// file) is loaded as absent: a change to it expects it absent, so the
// commit fails if it exists after all. Only the agent's failure is an error.
func (s *Set) LoadAll(ctx context.Context, paths []string) error {
	var need []string
	seen := map[string]bool{}
	for _, p := range paths {
		if s.files[p] == nil && !seen[p] {
			seen[p] = true
			need = append(need, p)
		}
	}
	if len(need) == 0 {
		return nil
	}
	res, err := s.agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: s.root, Paths: need, MaxBytesEach: s.lim.FileBytes, MaxTotal: s.lim.TotalBytes})
	if err != nil {
		return err
	}
	for i, p := range need {
		if i < len(res.Files) && res.Files[i].Skipped == "" {
			s.add(p, true, res.Files[i].Data)
		} else {
			s.add(p, false, nil)
		}
	}
	return nil
}

// Expect records a file read earlier, possibly by another call, of which
// only the hash of its content is known (see Hash). Its content reads as
// empty until Put. A path already in the set keeps what it has.
func (s *Set) Expect(path, hash string) *File {
	if f := s.files[path]; f != nil {
		return f
	}
	f := &File{path: path, existed: true, exists: true, hash: hash}
	s.files[path] = f
	s.order = append(s.order, f)
	return f
}

func (s *Set) add(path string, existed bool, data []byte) *File {
	f := &File{path: path, existed: existed, exists: existed, known: true}
	if existed {
		f.hash, f.orig = Hash(data), string(data)
		f.text = f.orig
	}
	s.files[path] = f
	s.order = append(s.order, f)
	return f
}

// File returns the file loaded under path, or nil.
func (s *Set) File(path string) *File { return s.files[path] }

// Changes returns the files Commit writes, creates or deletes, in the
// order they were loaded: each file a Put, Delete or SetMode touched,
// except one that was absent when read and is absent again.
func (s *Set) Changes() []*File {
	var out []*File
	for _, f := range s.order {
		if f.touched && (f.existed || f.exists) {
			out = append(out, f)
		}
	}
	return out
}

// Commit writes every change in one all-or-nothing request that expects
// each file as it was read, and with no change writes nothing. An error is
// the agent's, unchanged, so each tool keeps its own wording around it;
// after one, no file was written, unless the request was cut off (a
// deadline), when the files hold either all their old contents or all the
// new ones.
func (s *Set) Commit(ctx context.Context) error {
	ch := s.Changes()
	if len(ch) == 0 {
		return nil
	}
	req := &proto.WriteFilesRequest{Root: s.root, Files: make([]proto.WriteFile, 0, len(ch))}
	for _, f := range ch {
		req.Files = append(req.Files, f.write())
	}
	return s.agent.WriteFiles(ctx, req)
}

// Stale is a file that no longer holds what it held when read.
type Stale struct {
	Path string
	Gone bool // it existed and now cannot be read (deleted, or unreadable)
}

// Stale reads every file of Changes in one round trip and returns those
// that changed since they were read, in order: a tool can then name all of
// them at once, before Commit would fail at the first.
func (s *Set) Stale(ctx context.Context) ([]Stale, error) {
	ch := s.Changes()
	if len(ch) == 0 {
		return nil, nil
	}
	paths := make([]string, len(ch))
	for i, f := range ch {
		paths[i] = f.path
	}
	res, err := s.agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: s.root, Paths: paths, MaxBytesEach: s.lim.FileBytes, MaxTotal: s.lim.TotalBytes})
	if err != nil {
		return nil, err
	}
	var out []Stale
	for i, f := range ch {
		var got *proto.FileData
		if i < len(res.Files) {
			got = &res.Files[i]
		}
		switch {
		case !f.existed:
			if got == nil || got.Skipped != notFound {
				out = append(out, Stale{Path: f.path})
			}
		case got == nil || got.Skipped != "":
			out = append(out, Stale{Path: f.path, Gone: true})
		case Hash(got.Data) != f.hash:
			out = append(out, Stale{Path: f.path})
		}
	}
	return out, nil
}

// Hash is the hash a Set records and the agent checks: the hex sha256 of
// the content.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
