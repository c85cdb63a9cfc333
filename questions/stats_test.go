package questions

import (
	"context"
	"maps"
	"testing"
)

// PendingByKind counts what waits for a human, across tenants and spaces,
// and drops a question once it is answered.
func TestPendingByKind(t *testing.T) {
	p := New()
	defer p.Close()
	if got := p.PendingByKind(); len(got) != 0 {
		t.Fatalf("pending before any question = %v, want none", got)
	}
	subA, _ := p.Subscribe("a", "s")
	defer subA.Close()
	subB, _ := p.Subscribe("b", "t")
	defer subB.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One at a time, so each event is read before the next is asked.
	q1 := askAsync(p, ctx, "a", Question{Space: "s", Run: "r1", Kind: KindQuestion, Question: "which?"}, 0)
	q := nextQuestion(t, subA, "which?")
	askAsync(p, ctx, "b", Question{Space: "t", Run: "r2", Kind: KindQuestion, Question: "where?"}, 0)
	nextQuestion(t, subB, "where?")
	askAsync(p, ctx, "a", Question{Space: "s", Run: "r1", Kind: KindPermission, Question: "may I?",
		Options: []Option{{Label: "Allow"}, {Label: "Deny"}}}, 0)
	nextQuestion(t, subA, "may I?")
	if got, want := p.PendingByKind(), map[string]int{KindQuestion: 2, KindPermission: 1}; !maps.Equal(got, want) {
		t.Fatalf("pending = %v, want %v", got, want)
	}
	if err := p.Answer("a", q.ID, Answer{Text: "red"}); err != nil {
		t.Fatal(err)
	}
	wait(t, q1)
	if got, want := p.PendingByKind(), map[string]int{KindQuestion: 1, KindPermission: 1}; !maps.Equal(got, want) {
		t.Fatalf("pending after an answer = %v, want %v", got, want)
	}
	p.CancelRun("r1")
	if got, want := p.PendingByKind(), map[string]int{KindQuestion: 1}; !maps.Equal(got, want) {
		t.Fatalf("pending after the run ended = %v, want %v", got, want)
	}
}
