package changeset

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// fakeAgent serves files from a map and records the writes it is asked for.
type fakeAgent struct {
	files    map[string]string
	writes   []*proto.WriteFilesRequest
	writeErr error
}

var _ Agent = (*fakeAgent)(nil)

func (f *fakeAgent) ReadFile(_ context.Context, r *proto.ReadFileRequest) (*proto.ReadFileResponse, error) {
	d, ok := f.files[r.Path]
	if !ok {
		return nil, errdefs.NotFound("%s does not exist", r.Path)
	}
	return &proto.ReadFileResponse{Path: r.Path, Data: []byte(d), Size: int64(len(d))}, nil
}

func (f *fakeAgent) ReadFiles(_ context.Context, r *proto.ReadFilesRequest) (*proto.ReadFilesResponse, error) {
	out := &proto.ReadFilesResponse{}
	for _, p := range r.Paths {
		d, ok := f.files[p]
		fd := proto.FileData{Path: p, Data: []byte(d)}
		if !ok {
			fd.Data, fd.Skipped = nil, notFound
		}
		out.Files = append(out.Files, fd)
	}
	return out, nil
}

func (f *fakeAgent) WriteFiles(_ context.Context, r *proto.WriteFilesRequest) error {
	f.writes = append(f.writes, r)
	return f.writeErr
}

func TestCommitRequest(t *testing.T) {
	ctx := context.Background()
	a := &fakeAgent{files: map[string]string{"/w/m": "m", "/w/d": "d", "/w/same": "s"}}
	cs := New(a, "/w", Limits{})
	load := func(p string) *File {
		t.Helper()
		f, err := cs.LoadOrAbsent(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	m, d, same, n, tmp, untouched := load("/w/m"), load("/w/d"), load("/w/same"), load("/w/n"), load("/w/tmp"), load("/w/n2")
	m.Put("M")
	m.SetMode(0o755)
	d.SetMode(0o600) // a mode on a deleted file is not sent
	d.Delete()
	same.Put("s") // written although its content is what was read
	n.Put("N")
	tmp.Put("T") // created and deleted within the set: nothing to write
	tmp.Delete()
	_ = untouched
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := &proto.WriteFilesRequest{Root: "/w", Files: []proto.WriteFile{
		{Path: "/w/m", Data: []byte("M"), Mode: 0o755, ExpectSHA256: Hash([]byte("m"))},
		{Path: "/w/d", Delete: true, ExpectSHA256: Hash([]byte("d"))},
		{Path: "/w/same", Data: []byte("s"), ExpectSHA256: Hash([]byte("s"))},
		{Path: "/w/n", Data: []byte("N"), ExpectAbsent: true, MkdirAll: true},
	}}
	if len(a.writes) != 1 || !reflect.DeepEqual(a.writes[0], want) {
		t.Errorf("Commit sent %+v; want one request %+v", a.writes, want)
	}
}

func TestCommitWithNoChangeWritesNothing(t *testing.T) {
	ctx := context.Background()
	a := &fakeAgent{files: map[string]string{"/w/a": "a"}}
	cs := New(a, "/w", Limits{})
	f, _ := cs.Load(ctx, "/w/a")
	f.Put("b")
	f.Put("a")
	if !f.Unchanged() {
		t.Error("a file put back to its content as read is not Unchanged")
	}
	f.Revert()
	if err := cs.Commit(ctx); err != nil || len(a.writes) != 0 {
		t.Errorf("Commit of a reverted set: %v, %d requests; want none", err, len(a.writes))
	}
	if f.Text() != "a" || !f.Exists() {
		t.Errorf("after Revert the file reads %q (exists %v); want it as read", f.Text(), f.Exists())
	}
}

func TestUnchanged(t *testing.T) {
	ctx := context.Background()
	a := &fakeAgent{files: map[string]string{"/w/a": "a"}}
	cs := New(a, "/w", Limits{})
	f, _ := cs.Load(ctx, "/w/a")
	for _, c := range []struct {
		name   string
		change func()
		want   bool
	}{
		{"untouched", func() {}, true},
		{"new content", func() { f.Put("b") }, false},
		{"deleted", func() { f.Delete() }, false},
		{"deleted and put back", func() { f.Delete(); f.Put("a") }, true},
		{"new mode", func() { f.SetMode(0o700) }, false},
	} {
		f.Revert()
		c.change()
		if got := f.Unchanged(); got != c.want {
			t.Errorf("%s: Unchanged = %v, want %v", c.name, got, c.want)
		}
	}
	e := cs.Expect("/w/e", Hash([]byte("e")))
	if !e.Unchanged() {
		t.Error("an Expect file nothing touched is not Unchanged")
	}
	if e.Put("e"); e.Unchanged() {
		t.Error("an Expect file, whose content as read is unknown, is Unchanged after a Put")
	}
}

func TestCommitErrorIsTheAgents(t *testing.T) {
	ctx := context.Background()
	werr := errdefs.FailedPrecondition("/w/a changed since it was read; read it again before writing")
	a := &fakeAgent{files: map[string]string{"/w/a": "a"}, writeErr: werr}
	cs := New(a, "/w", Limits{})
	f, _ := cs.Load(ctx, "/w/a")
	f.Put("b")
	if err := cs.Commit(ctx); !errors.Is(err, errdefs.ErrFailedPrecondition) || err.Error() != werr.Error() {
		t.Errorf("Commit = %v; want the agent's error unchanged", err)
	}
}
