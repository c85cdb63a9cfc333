package runstore

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// fakeRecords is a Records shared by several Stores, as the
// replicas of one deployment share their records.
type fakeRecords struct {
	mu        sync.Mutex // guards the fields below
	runs      map[string]tools.Run
	putErr    error
	removeErr error
	getErr    error
	removed   []string // ids whose Remove succeeded
}

var _ Records = (*fakeRecords)(nil)

func newFakeRecords() *fakeRecords { return &fakeRecords{runs: map[string]tools.Run{}} }

func (f *fakeRecords) Put(ctx context.Context, run tools.Run) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.putErr != nil {
		return f.putErr
	}
	f.runs[run.ID] = run
	return nil
}

func (f *fakeRecords) Remove(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removeErr != nil {
		return f.removeErr
	}
	delete(f.runs, id)
	f.removed = append(f.removed, id)
	return nil
}

func (f *fakeRecords) Get(ctx context.Context, id string) (tools.Run, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return tools.Run{}, false, f.getErr
	}
	r, ok := f.runs[id]
	return r, ok, nil
}

func (f *fakeRecords) List(tenant string) []tools.Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []tools.Run
	for _, r := range f.runs {
		if r.Tenant == tenant {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeRecords) Count(tenant string) int { return len(f.List(tenant)) }

func (f *fakeRecords) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.runs[id]
	return ok
}

func (f *fakeRecords) set(put, remove, get error) {
	f.mu.Lock()
	f.putErr, f.removeErr, f.getErr = put, remove, get
	f.mu.Unlock()
}

// endings records the run-end hook's calls.
type endings struct {
	mu  sync.Mutex // guards got
	got map[string]string
}

func (e *endings) hook(r tools.Run, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.got == nil {
		e.got = map[string]string{}
	}
	e.got[r.ID] = reason
}

func (e *endings) all() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.got)
}

func ids(runs []tools.Run) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// A run created on one replica is served, listed and deleted by another;
// the replica that created it stops serving it once it is deleted.
func TestRunRecordsAcrossReplicas(t *testing.T) {
	f := newFakeRecords()
	var endA, endB endings
	a := New(WithRecords(f, nil), WithEndHook(endA.hook))
	b := New(WithRecords(f, nil), WithEndHook(endB.hook))

	run, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c", Surface: "code", Approval: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.has(run.ID) {
		t.Fatalf("the run is not in the records after Create returned")
	}
	child, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c", Parent: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if f.has(child.ID) {
		t.Errorf("a child run was put into the records; it lives in memory only")
	}
	// b lists a's top-level run before it ever served it.
	if got := ids(b.List(t.Context(), "t")); !slices.Equal(got, []string{run.ID}) {
		t.Errorf("b lists %v, want only %s", got, run.ID)
	}
	if got := ids(a.List(t.Context(), "t")); len(got) != 2 || !slices.Contains(got, run.ID) || !slices.Contains(got, child.ID) {
		t.Errorf("a lists %v, want the run and its child once each", got)
	}
	if got, err := b.Get(t.Context(), "t", run.ID); err != nil || got != run {
		t.Fatalf("b.Get = %+v, %v; want %+v", got, err, run)
	}
	if n := b.Active(); n != 1 {
		t.Errorf("b holds %d runs after serving one, want 1", n)
	}
	if got := ids(b.List(t.Context(), "t")); !slices.Equal(got, []string{run.ID}) {
		t.Errorf("b lists %v after adopting, want %s once", got, run.ID)
	}
	if _, err := b.Get(t.Context(), "other", run.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's Get on b: %v, want not found", err)
	}
	if _, err := b.Get(t.Context(), "t", child.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b.Get of a's child run: %v, want not found (children stay on their replica)", err)
	}

	if err := b.Delete(t.Context(), "t", run.ID); err != nil {
		t.Fatal(err)
	}
	if f.has(run.ID) {
		t.Errorf("the record outlived Delete")
	}
	if _, err := a.Get(t.Context(), "t", run.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a.Get after b deleted the run: %v, want not found", err)
	}
	if _, err := a.Get(t.Context(), "t", child.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a.Get of the child after b deleted its parent: %v, want not found", err)
	}
	if got := endA.all(); got[run.ID] != "deleted" || got[child.ID] != "parent ended" || len(got) != 2 {
		t.Errorf("a's ended runs = %v", got)
	}
	if got := endB.all(); got[run.ID] != "deleted" || len(got) != 1 {
		t.Errorf("b's ended runs = %v", got)
	}
	if got := a.List(t.Context(), "t"); len(got) != 0 {
		t.Errorf("a lists %v after the delete", ids(got))
	}

	// A run only the other replica holds is deleted from the records.
	other, _ := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c2"})
	if err := b.Delete(t.Context(), "x", other.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's Delete on b: %v, want not found", err)
	}
	if err := b.Delete(t.Context(), "t", other.ID); err != nil || f.has(other.ID) {
		t.Errorf("b.Delete of a's run = %v, record left: %v", err, f.has(other.ID))
	}
	if _, err := b.Get(t.Context(), "t", other.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("b.Get after its own delete: %v", err)
	}
	if err := b.Delete(t.Context(), "t", other.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Delete: %v, want not found", err)
	}
}

// The per-tenant limit counts the runs of every replica.
func TestRunRecordsLimitAcrossReplicas(t *testing.T) {
	f := newFakeRecords()
	a := New(WithRecords(f, nil), WithMaxPerTenant(3))
	b := New(WithRecords(f, nil), WithMaxPerTenant(3))
	r1, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c", Parent: r1.ID}); err != nil {
		t.Fatal(err)
	}
	// a is full: two recorded runs and its child. b does not see a's child
	// (child runs live on their replica), so it has one place left.
	if _, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("a: two runs and a child of a limit of 3, then: %v, want resource exhausted", err)
	}
	if _, err := b.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}); err != nil {
		t.Fatalf("b: the third top-level run: %v", err)
	}
	for name, s := range map[string]*Store{"a": a, "b": b} {
		if _, err := s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}); !errors.Is(err, errdefs.ErrResourceExhausted) {
			t.Errorf("%s: fourth run of the tenant: %v, want resource exhausted", name, err)
		}
	}
	if _, err := b.Create(t.Context(), tools.Run{Tenant: "u", Conversation: "c"}); err != nil {
		t.Errorf("another tenant is held to this tenant's limit: %v", err)
	}
	// b frees a place by deleting a's run; a's child ends on a's next use.
	if err := b.Delete(t.Context(), "t", r1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}); err != nil {
		t.Errorf("after a delete on the other replica: %v", err)
	}
	if _, err := a.Get(t.Context(), "t", r1.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a serves the run b deleted: %v", err)
	}
}

// Concurrent creates on one replica never pass the limit while their
// records are being written.
func TestRunRecordsLimitConcurrent(t *testing.T) {
	f := newFakeRecords()
	s := New(WithRecords(f, nil), WithMaxPerTenant(20))
	var wg sync.WaitGroup
	for range 60 {
		wg.Go(func() { s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}) })
	}
	wg.Wait()
	if n, m := f.Count("t"), s.Active(); n != 20 || m != 20 {
		t.Errorf("records hold %d runs, memory %d; want the limit, 20", n, m)
	}
}

// A run whose record cannot be written is not created.
func TestRunRecordsPutFailure(t *testing.T) {
	f := newFakeRecords()
	f.set(errors.New("apiserver down"), nil, nil)
	s := New(WithRecords(f, nil), WithMaxPerTenant(1))
	run, err := s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	if !errors.Is(err, errdefs.ErrUnavailable) || run.ID != "" {
		t.Fatalf("Create with records down = %+v, %v; want unavailable and no run", run, err)
	}
	if n := s.Active(); n != 0 {
		t.Errorf("%d runs in memory after a failed create", n)
	}
	if got := s.List(t.Context(), "t"); len(got) != 0 {
		t.Errorf("List after a failed create = %v", ids(got))
	}
	f.mu.Lock()
	tried := len(f.removed)
	f.mu.Unlock()
	if tried != 1 {
		t.Errorf("the possibly written record was removed %d times, want once", tried)
	}
	// The place held during the write is free again.
	f.set(nil, nil, nil)
	if _, err := s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}); err != nil {
		t.Errorf("Create once records are back: %v", err)
	}
}

// Handing a conversation over moves its runs between replicas without
// ending them.
func TestRunRecordsForgetAdopt(t *testing.T) {
	f := newFakeRecords()
	var endA, endB endings
	a := New(WithRecords(f, nil), WithEndHook(endA.hook))
	b := New(WithRecords(f, nil), WithEndHook(endB.hook))
	r1, _ := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c1"})
	r2, _ := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c1", Surface: "plan"})
	kid, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c1", Parent: r1.ID})
	if err != nil {
		t.Fatal(err)
	}
	keep, _ := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c2"})
	same, _ := a.Create(t.Context(), tools.Run{Tenant: "u", Conversation: "c1"})

	a.ForgetConversation("t", "c1")
	if n := a.Active(); n != 2 {
		t.Errorf("a holds %d runs after forgetting c1, want c2's and tenant u's", n)
	}
	if got := endA.all(); len(got) != 0 {
		t.Errorf("forgetting ended runs: %v", got)
	}
	if !f.has(r1.ID) || !f.has(r2.ID) {
		t.Errorf("forgetting removed records")
	}
	if got, ok := a.Lookup(t.Context(), r1.ID); !ok || got != r1 {
		t.Errorf("a.Lookup of a forgotten run = %+v, %v; want it from the records", got, ok)
	}
	if n := a.Active(); n != 2 {
		t.Errorf("Lookup kept the run in memory: %d runs", n)
	}

	if n := b.AdoptConversation(context.Background(), "t", "c1"); n != 2 {
		t.Errorf("b adopted %d runs of c1, want 2", n)
	}
	if n := b.AdoptConversation(context.Background(), "t", "c1"); n != 0 {
		t.Errorf("adopting again took %d more runs", n)
	}
	if n := b.Active(); n != 2 {
		t.Errorf("b holds %d runs, want c1's two", n)
	}
	if got, err := b.Get(t.Context(), "t", r2.ID); err != nil || got != r2 {
		t.Errorf("b.Get of an adopted run = %+v, %v", got, err)
	}
	if _, err := b.Get(t.Context(), "t", kid.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a child run moved with its conversation: %v", err)
	}
	if _, err := b.Get(t.Context(), "u", same.ID); err != nil {
		t.Errorf("another tenant's run of a conversation with the same name: %v", err)
	}
	if got := endB.all(); len(got) != 0 {
		t.Errorf("adopting ended runs: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := New(WithRecords(f, nil))
	if n := c.AdoptConversation(ctx, "t", "c1"); n != 0 {
		t.Errorf("adopting with a done context took %d runs", n)
	}
	if _, err := a.Get(t.Context(), "t", keep.ID); err != nil {
		t.Errorf("a no longer serves the conversation it kept: %v", err)
	}
}

// An expired run's record goes; a record whose removal fails is not
// served again here, and its removal is retried.
func TestRunRecordsExpiryAndRemoveFailure(t *testing.T) {
	f := newFakeRecords()
	clk := &clock{t: time.Unix(1000, 0)}
	var mu sync.Mutex
	var recErrs []error
	var end endings
	s := New(WithRecords(f, func(err error) { mu.Lock(); recErrs = append(recErrs, err); mu.Unlock() }),
		WithClock(clk.now), WithTTL(time.Hour), WithEndHook(end.hook))
	other := New(WithRecords(f, nil), WithClock(clk.now), WithTTL(time.Hour))

	old, _ := s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	clk.add(time.Hour)
	if n := s.Active(); n != 0 {
		t.Fatalf("%d runs live after the TTL", n)
	}
	if f.has(old.ID) || end.all()[old.ID] != "expired" {
		t.Errorf("expired run: record left %v, ended %v", f.has(old.ID), end.all())
	}
	if _, err := other.Get(t.Context(), "t", old.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the other replica serves an expired run: %v", err)
	}

	run, _ := s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	f.set(nil, errors.New("apiserver down"), nil)
	if err := s.Delete(t.Context(), "t", run.ID); err != nil {
		t.Fatalf("Delete with records down: %v (the run ended here)", err)
	}
	mu.Lock()
	n := len(recErrs)
	mu.Unlock()
	if n != 1 || !f.has(run.ID) {
		t.Fatalf("failed removal: %d errors heard, record left %v; want one error and the record", n, f.has(run.ID))
	}
	if _, err := s.Get(t.Context(), "t", run.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a deleted run came back from its record: %v", err)
	}
	if got := s.List(t.Context(), "t"); len(got) != 0 {
		t.Errorf("List shows a deleted run: %v", ids(got))
	}
	if _, ok := s.Lookup(t.Context(), run.ID); ok {
		t.Errorf("Lookup finds a deleted run")
	}
	if n := s.AdoptConversation(context.Background(), "t", "c"); n != 0 {
		t.Errorf("adopting took back %d deleted runs", n)
	}
	if got := end.all()[run.ID]; got != "deleted" {
		t.Errorf("the deleted run ended as %q", got)
	}

	f.set(nil, nil, nil)
	clk.add(removeRetryEvery)
	s.Active() // any use starts the retry that is due
	deadline := time.Now().Add(5 * time.Second)
	for f.has(run.ID) {
		if time.Now().After(deadline) {
			t.Fatal("the failed removal was not retried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Get(t.Context(), "t", run.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("after the retry: %v", err)
	}
}

// With the records unreachable, runs in memory are still served and a run
// that is not there is unavailable, not missing.
func TestRunRecordsGetFailure(t *testing.T) {
	f := newFakeRecords()
	a := New(WithRecords(f, nil))
	b := New(WithRecords(f, nil))
	run, _ := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	f.set(nil, nil, errors.New("apiserver down"))
	if _, err := a.Get(t.Context(), "t", run.ID); err != nil {
		t.Errorf("a run in memory is not served while the records are down: %v", err)
	}
	if _, err := b.Get(t.Context(), "t", run.ID); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("b.Get with records down: %v, want unavailable", err)
	}
	if err := b.Delete(t.Context(), "t", run.ID); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("b.Delete with records down: %v, want unavailable", err)
	}
	if _, ok := b.Lookup(t.Context(), run.ID); ok {
		t.Errorf("Lookup answers with records down")
	}
	f.set(nil, nil, nil)
	if got, ok := b.Lookup(t.Context(), run.ID); !ok || got != run {
		t.Errorf("b.Lookup = %+v, %v", got, ok)
	}
	if _, ok := b.Lookup(t.Context(), "run_missing"); ok {
		t.Errorf("Lookup finds a run that never was")
	}
	if n := b.Active(); n != 0 {
		t.Errorf("Lookup kept %d runs in b's memory", n)
	}
}

// With records, the run file is neither written nor read.
func TestRunRecordsReplaceTheRunFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	f := newFakeRecords()
	s := New(WithFile(path, nil), WithRecords(f, nil))
	if _, err := s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run file was written with records: %v", err)
	}
	if n, err := s.Load(); n != 0 || err != nil {
		t.Errorf("Load with records = %d, %v", n, err)
	}
}
