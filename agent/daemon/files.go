package daemon

import (
	"context"
	"log/slog"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// fileService serves the file operations (read_file, read_files,
// write_files, stat, walk; xattrs, files_xattrs.go) on workspaces confined to their root
// (files_confine.go, files_beneath.go), with write_files batches kept
// crash-atomic by the journal (journal.go). It starts no goroutine of its
// own and holds nothing to close.
type fileService struct {
	// journal keeps write_files batches crash-atomic; nil without a
	// state dir.
	journal *journal
	limits  readLimits
	hook    func(i int) error // test-only fault injection in write_files
}

var _ service = (*fileService)(nil)

// newFileService opens the journal in stateDir ("": none).
func newFileService(stateDir string, limits readLimits, hook func(int) error, log *slog.Logger) *fileService {
	f := &fileService{limits: limits, hook: hook}
	if stateDir != "" {
		j, err := openJournal(stateDir, log)
		if err != nil {
			// Every write_files then fails with this error message rather than
			// commit without the journal it was configured with.
			log.Error("the agent cannot keep commit journals", "err", err)
			j = &journal{dir: stateDir, log: log, broken: err}
		}
		f.journal = j
	}
	return f
}

func (f *fileService) register(t opTable) {
	addBody(t, proto.OpReadFile, func(r *proto.Request) *proto.ReadFileRequest { return r.ReadFile }, f.readFile)
	addBody(t, proto.OpReadFiles, func(r *proto.Request) *proto.ReadFilesRequest { return r.ReadFiles }, f.readFiles)
	addBody(t, proto.OpWriteFiles, func(r *proto.Request) *proto.WriteFilesRequest { return r.WriteFiles }, f.writeFiles)
	addBody(t, proto.OpStat, func(r *proto.Request) *proto.StatRequest { return r.Stat }, f.stat)
	addBody(t, proto.OpWalk, func(r *proto.Request) *proto.WalkRequest { return r.Walk }, f.walk)
	addBody(t, proto.OpXattrs, func(r *proto.Request) *proto.XattrsRequest { return r.Xattrs }, f.xattrs)
}

func (f *fileService) readFile(_ context.Context, _ *request, r *proto.ReadFileRequest) (*proto.Response, func(), error) {
	if err := f.settle(r.Root); err != nil {
		return nil, nil, err
	}
	resp, err := readFile(r, f.limits)
	return &proto.Response{ReadFile: resp}, nil, err
}

func (f *fileService) readFiles(_ context.Context, _ *request, r *proto.ReadFilesRequest) (*proto.Response, func(), error) {
	if err := f.settle(r.Root); err != nil {
		return nil, nil, err
	}
	resp, err := readFiles(r, f.limits)
	return &proto.Response{ReadFiles: resp}, nil, err
}

func (f *fileService) writeFiles(_ context.Context, _ *request, r *proto.WriteFilesRequest) (*proto.Response, func(), error) {
	if err := f.settle(r.Root); err != nil {
		return nil, nil, err
	}
	return &proto.Response{}, nil, writeFiles(r, commitEnv{journal: f.journal, hook: f.hook, limits: f.limits})
}

func (f *fileService) stat(_ context.Context, _ *request, r *proto.StatRequest) (*proto.Response, func(), error) {
	if err := f.settle(r.Root); err != nil {
		return nil, nil, err
	}
	resp, err := stat(r)
	return &proto.Response{Stat: resp}, nil, err
}

func (f *fileService) walk(_ context.Context, _ *request, r *proto.WalkRequest) (*proto.Response, func(), error) {
	if err := f.settle(r.Root); err != nil {
		return nil, nil, err
	}
	resp, err := walk(r)
	return &proto.Response{Walk: resp}, nil, err
}

// recoverAll settles every commit an earlier agent left unfinished.
func (f *fileService) recoverAll() error {
	if f.journal == nil || f.journal.broken != nil {
		return nil
	}
	return f.journal.recover("")
}

// settle settles the unfinished commits on root before an operation on
// it; a workspace whose commit cannot be settled is not served, so no one
// reads, writes or watches a tree that is neither the old nor the new.
func (f *fileService) settle(root string) error {
	if f.journal == nil || f.journal.broken != nil {
		return nil
	}
	real, err := resolveRoot(root)
	if err != nil {
		return nil // the operation itself says what is wrong with root
	}
	if err := f.journal.recover(real); err != nil {
		return errdefs.Unavailable("an interrupted write in %s could not be settled (%v); check the workspace's file system and retry", root, err)
	}
	return nil
}
