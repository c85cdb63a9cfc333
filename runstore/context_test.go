package runstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// ctxRecords are fakeRecords that honour their context as the Kubernetes
// client does: a call on a done context fails with its error, and while
// hang is set a call waits until its context is done (the store bounds
// each call by DefaultRecordsTimeout).
type ctxRecords struct {
	*fakeRecords
	hang atomic.Bool
}

var _ Records = (*ctxRecords)(nil)

func (c *ctxRecords) wait(ctx context.Context) error {
	if c.hang.Load() {
		<-ctx.Done()
	}
	return ctx.Err()
}

func (c *ctxRecords) Put(ctx context.Context, run tools.Run) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.fakeRecords.Put(ctx, run)
}

func (c *ctxRecords) Remove(ctx context.Context, id string) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.fakeRecords.Remove(ctx, id)
}

func (c *ctxRecords) Get(ctx context.Context, id string) (tools.Run, bool, error) {
	if err := c.wait(ctx); err != nil {
		return tools.Run{}, false, err
	}
	return c.fakeRecords.Get(ctx, id)
}

// cancelSoon is a context its caller gives up on after a moment.
func cancelSoon(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// A caller that gives up stops waiting for records that hang: the store
// returns at once instead of after DefaultRecordsTimeout.
func TestRecordsCallsEndWithTheCaller(t *testing.T) {
	if DefaultRecordsTimeout < 3*time.Second {
		t.Fatalf("DefaultRecordsTimeout %v is too short to tell the caller's cancellation from it", DefaultRecordsTimeout)
	}
	const soon = 2 * time.Second // well inside DefaultRecordsTimeout
	rec := &ctxRecords{fakeRecords: newFakeRecords()}
	a := New(WithRecords(rec, nil))
	b := New(WithRecords(rec, nil))
	elsewhere, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	rec.hang.Store(true)

	for name, call := range map[string]func(ctx context.Context) error{
		"Create": func(ctx context.Context) error {
			_, err := b.Create(ctx, tools.Run{Tenant: "t", Conversation: "c2"})
			if !errors.Is(err, errdefs.ErrUnavailable) {
				return errors.New("err = " + errString(err) + ", want unavailable")
			}
			return nil
		},
		"Get": func(ctx context.Context) error {
			_, err := b.Get(ctx, "t", elsewhere.ID)
			if !errors.Is(err, errdefs.ErrUnavailable) {
				return errors.New("err = " + errString(err) + ", want unavailable")
			}
			return nil
		},
		"Lookup": func(ctx context.Context) error {
			if _, ok := b.Lookup(ctx, elsewhere.ID); ok {
				return errors.New("found a run the records never answered for")
			}
			return nil
		},
		"Delete": func(ctx context.Context) error {
			if err := b.Delete(ctx, "t", elsewhere.ID); !errors.Is(err, errdefs.ErrUnavailable) {
				return errors.New("err = " + errString(err) + ", want unavailable")
			}
			return nil
		},
	} {
		start := time.Now()
		if err := call(cancelSoon(t)); err != nil {
			t.Errorf("%s with records that hang: %v", name, err)
		}
		if took := time.Since(start); took > soon {
			t.Errorf("%s took %v after its caller gave up at 100ms; the caller's context does not reach the records", name, took)
		}
	}
	rec.hang.Store(false)
	if got := b.List(t.Context(), "t"); len(got) != 1 || got[0].ID != elsewhere.ID {
		t.Errorf("after the cancelled calls the tenant has %v, want only %s (nothing created, nothing deleted)", ids(got), elsewhere.ID)
	}
}

// The record of a run that ended here is removed even when the caller who
// ended it has gone: it would otherwise count against the tenant and be
// served by other replicas until a retry.
func TestEndedRunRecordOutlivesTheCaller(t *testing.T) {
	rec := &ctxRecords{fakeRecords: newFakeRecords()}
	s := New(WithRecords(rec, nil))
	run, err := s.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Delete(gone, "t", run.ID); err != nil {
		t.Fatalf("Delete of a run in memory by a caller that has gone: %v", err)
	}
	if rec.has(run.ID) {
		t.Error("the ended run's record is still there: its removal was cancelled with the caller")
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
