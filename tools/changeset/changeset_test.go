package changeset_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools/changeset"
)

// workspace is a temp dir holding files, served by a real in-process agent.
func workspace(t *testing.T, files map[string]string) (changeset.Agent, string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		write(t, filepath.Join(ws, name), data)
	}
	c, _ := agenttest.New(t)
	return c, ws
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// contents returns each name's content under ws, "<absent>" for a missing one.
func contents(t *testing.T, ws string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(ws, n))
		switch {
		case errors.Is(err, os.ErrNotExist):
			out[n] = "<absent>"
		case err != nil:
			t.Fatal(err)
		default:
			out[n] = string(b)
		}
	}
	return out
}

// refused commits cs, which must fail with the agent's failed precondition
// saying why, and checks that the files under ws are still as in want.
func refused(ctx context.Context, t *testing.T, cs *changeset.Set, ws, why string, want map[string]string) {
	t.Helper()
	err := cs.Commit(ctx)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), why) {
		t.Fatalf("Commit = %v; want the agent's failed precondition (%q)", err, why)
	}
	if got := contents(t, ws, slices.Collect(maps.Keys(want))...); !maps.Equal(got, want) {
		t.Errorf("after the failed commit the files are %v; want %v (nothing written)", got, want)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCommitWritesEveryChangeAtOnce(t *testing.T) {
	a, ws := workspace(t, map[string]string{"a.txt": "one\n", "gone.txt": "bye\n"})
	ctx := ctxT(t)
	cs := changeset.New(a, ws, changeset.Limits{})
	f, err := cs.Load(ctx, filepath.Join(ws, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// Two changes to one file compose: the second starts from the first.
	f.Put(f.Text() + "two\n")
	f.Put(strings.ToUpper(f.Text()))
	again, err := cs.Load(ctx, filepath.Join(ws, "a.txt"))
	if err != nil || again != f {
		t.Fatalf("loading a.txt again gave %p, %v; want the file already in the set", again, err)
	}
	gone, err := cs.LoadOrAbsent(ctx, filepath.Join(ws, "gone.txt"))
	if err != nil {
		t.Fatal(err)
	}
	gone.Delete()
	fresh, err := cs.LoadOrAbsent(ctx, filepath.Join(ws, "sub", "new.txt"))
	if err != nil || fresh.Existed() {
		t.Fatalf("a missing file loaded as %+v, %v; want absent", fresh, err)
	}
	fresh.Put("new\n")
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a.txt": "ONE\nTWO\n", "gone.txt": "<absent>", "sub/new.txt": "new\n"}
	if got := contents(t, ws, "a.txt", "gone.txt", "sub/new.txt"); !maps.Equal(got, want) {
		t.Errorf("after the commit the files are %v; want %v", got, want)
	}
}

func TestCommitFailsWholeWhenAFileChangedSinceRead(t *testing.T) {
	a, ws := workspace(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	ctx := ctxT(t)
	cs := changeset.New(a, ws, changeset.Limits{})
	for _, n := range []string{"a.txt", "b.txt"} {
		f, err := cs.Load(ctx, filepath.Join(ws, n))
		if err != nil {
			t.Fatal(err)
		}
		f.Put("changed " + f.Text())
	}
	write(t, filepath.Join(ws, "b.txt"), "meanwhile\n")
	stale, err := cs.Stale(ctx)
	if err != nil || len(stale) != 1 || stale[0].Path != filepath.Join(ws, "b.txt") || stale[0].Gone {
		t.Errorf("Stale = %+v, %v; want b.txt changed", stale, err)
	}
	refused(ctx, t, cs, ws, "changed since it was read", map[string]string{"a.txt": "a\n", "b.txt": "meanwhile\n"})
}

func TestCommitExpectsANewFileAbsent(t *testing.T) {
	a, ws := workspace(t, map[string]string{"a.txt": "a\n"})
	ctx := ctxT(t)
	cs := changeset.New(a, ws, changeset.Limits{})
	old, err := cs.Load(ctx, filepath.Join(ws, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	old.Put("edited\n")
	if _, err := cs.Load(ctx, filepath.Join(ws, "new.txt")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Load of a missing file: %v; want the agent's not found", err)
	}
	f, err := cs.LoadOrAbsent(ctx, filepath.Join(ws, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f.Put("mine\n")
	write(t, filepath.Join(ws, "new.txt"), "theirs\n")
	if stale, err := cs.Stale(ctx); err != nil || len(stale) != 1 || stale[0].Path != filepath.Join(ws, "new.txt") {
		t.Errorf("Stale = %+v, %v; want new.txt, created behind the set's back", stale, err)
	}
	refused(ctx, t, cs, ws, "expected to be absent", map[string]string{"a.txt": "a\n", "new.txt": "theirs\n"})
}

func TestLoadAllAndStale(t *testing.T) {
	a, ws := workspace(t, map[string]string{"a.txt": "a\n", "big.txt": strings.Repeat("x", 100)})
	ctx := ctxT(t)
	cs := changeset.New(a, ws, changeset.Limits{FileBytes: 50})
	p := func(n string) string { return filepath.Join(ws, n) }
	if err := cs.LoadAll(ctx, []string{p("a.txt"), p("missing.txt"), p("big.txt"), p("a.txt")}); err != nil {
		t.Fatal(err)
	}
	if f := cs.File(p("a.txt")); f == nil || !f.Exists() || f.Text() != "a\n" {
		t.Errorf("a.txt loaded as %+v", f)
	}
	for _, n := range []string{"missing.txt", "big.txt"} {
		if f := cs.File(p(n)); f == nil || f.Existed() {
			t.Errorf("%s loaded as %+v; want absent (the agent did not return it)", n, f)
		}
	}
	if cs.File(p("other.txt")) != nil {
		t.Error("File of a path never loaded is not nil")
	}
	cs.File(p("a.txt")).Put("b\n")
	if err := os.Remove(p("a.txt")); err != nil {
		t.Fatal(err)
	}
	stale, err := cs.Stale(ctx)
	if err != nil || len(stale) != 1 || !stale[0].Gone {
		t.Errorf("Stale after a.txt was deleted = %+v, %v; want it gone", stale, err)
	}
}

func TestTooLarge(t *testing.T) {
	a, ws := workspace(t, map[string]string{"big.txt": strings.Repeat("x", 100)})
	cs := changeset.New(a, ws, changeset.Limits{FileBytes: 10})
	_, err := cs.Load(ctxT(t), filepath.Join(ws, "big.txt"))
	var big *changeset.TooLargeError
	if !errors.As(err, &big) || big.Size != 100 || big.Limit != 10 {
		t.Fatalf("Load of a 100-byte file with a 10-byte limit: %v; want a TooLargeError with both sizes", err)
	}
}

func TestExpectCommitsAgainstARecordedHash(t *testing.T) {
	a, ws := workspace(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	ctx := ctxT(t)
	cs := changeset.New(a, ws, changeset.Limits{})
	cs.Expect(filepath.Join(ws, "a.txt"), changeset.Hash([]byte("a\n"))).Put("A\n")
	cs.Expect(filepath.Join(ws, "b.txt"), changeset.Hash([]byte("not b\n"))).Put("B\n")
	stale, err := cs.Stale(ctx)
	if err != nil || len(stale) != 1 || stale[0].Path != filepath.Join(ws, "b.txt") {
		t.Errorf("Stale = %+v, %v; want b.txt, whose hash differs", stale, err)
	}
	refused(ctx, t, cs, ws, "changed since it was read", map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
}
