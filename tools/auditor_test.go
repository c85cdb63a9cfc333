package tools

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

type ctxKeyT struct{}

// auditor keeps what AuditToolCall got.
type auditor struct {
	ctxVal []any
	recs   []CallRecord
}

func (a *auditor) ObserveToolCall(string, Level, string, time.Duration) {}
func (a *auditor) AuditToolCall(ctx context.Context, rec CallRecord) {
	a.ctxVal = append(a.ctxVal, ctx.Value(ctxKeyT{}))
	a.recs = append(a.recs, rec)
}

// noteGate answers like the approval gate: it notes its decision, and
// refuses when it denied.
type noteGate struct{ decision string }

func (g noteGate) Check(ctx context.Context, env *Env, spec Spec, args json.RawMessage) *Result {
	NoteApproval(ctx, g.decision)
	if g.decision == ApprovalDenied {
		r := Error("denied")
		return &r
	}
	return nil
}

func TestAuditorGetsTheCallsContextAndTheApprovalDecision(t *testing.T) {
	a := &auditor{}
	r := NewRegistry(WithObserver(a), WithGate(noteGate{decision: ApprovalDenied}))
	r.Register(newFake("write", LevelWrite, true))
	r.Register(newFake("read", LevelRead, true))
	ctx := context.WithValue(context.Background(), ctxKeyT{}, "req-1")
	env := &Env{Run: &Run{ID: "r1", Tenant: "acme"}}
	r.Call(ctx, env, "write", json.RawMessage(`{"path":"a"}`))
	r.Call(ctx, env, "read", json.RawMessage(`{"path":"a"}`))
	if len(a.recs) != 2 {
		t.Fatalf("%d records, want one per call", len(a.recs))
	}
	if a.ctxVal[0] != "req-1" || a.recs[0].Approval != ApprovalDenied || a.recs[0].Outcome != OutcomeToolError {
		t.Fatalf("write: ctx %v, record %+v", a.ctxVal[0], a.recs[0])
	}
	if a.recs[1].Approval != "" {
		t.Fatalf("a read call asks nothing, yet its record says %q", a.recs[1].Approval)
	}
}
