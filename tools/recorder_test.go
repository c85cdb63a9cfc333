package tools

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// metricsOnly is an observer without the CallRecorder capability.
type metricsOnly struct{ n int }

func (m *metricsOnly) ObserveToolCall(string, Level, string, time.Duration) { m.n++ }

// fullRecorder has it.
type fullRecorder struct {
	mu   sync.Mutex // guards recs
	recs []CallRecord
}

func (f *fullRecorder) ObserveToolCall(string, Level, string, time.Duration) {}
func (f *fullRecorder) RecordToolCall(rec CallRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs = append(f.recs, rec)
}

func TestRecorderGetsTheRunArgsAndResultBesideTheMetrics(t *testing.T) {
	m := &metricsOnly{}
	rec := &fullRecorder{}
	r := NewRegistry(WithObserver(m))
	r.AddObserver(rec)
	r.Register(newFake("read", LevelRead, true))
	env := &Env{Run: &Run{ID: "r1", Tenant: "acme"}}

	if _, err := r.Call(context.Background(), env, "read", json.RawMessage(`{"path":"a.go"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Call(context.Background(), env, "read", json.RawMessage(`{"nope":1}`)); err != nil {
		t.Fatal(err)
	}
	if m.n != 2 {
		t.Fatalf("the metrics observer saw %d calls, want 2", m.n)
	}
	if len(rec.recs) != 2 {
		t.Fatalf("the recorder got %d records, want 2", len(rec.recs))
	}
	ok, bad := rec.recs[0], rec.recs[1]
	if ok.Run == nil || ok.Run.ID != "r1" || ok.Run.Tenant != "acme" || ok.Tool != "read" || ok.Outcome != OutcomeOK {
		t.Fatalf("first record %+v", ok)
	}
	if string(ok.Args) != `{"path":"a.go"}` || ok.Result.Text() != `ok {"path":"a.go"}` || ok.Started.IsZero() {
		t.Fatalf("first record args %s result %q", ok.Args, ok.Result.Text())
	}
	if bad.Outcome != OutcomeInvalidArguments || string(bad.Args) != `{"nope":1}` || !bad.Result.IsError {
		t.Fatalf("invalid call recorded as %+v", bad)
	}
}
