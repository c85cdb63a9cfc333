package questions

import (
	"context"
	"slices"
	"sync"
	"testing"
)

func TestObserverHearsAskedThenResolved(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	p := New(WithObserver(func(tenant string, q Question, r *Resolution) {
		mu.Lock()
		defer mu.Unlock()
		if r == nil {
			heard = append(heard, tenant+" asked "+q.Run)
		} else {
			heard = append(heard, tenant+" "+r.Status+" "+q.Run)
		}
	}))
	sub, _ := p.Subscribe("a", "s")
	defer sub.Close()
	ch := askAsync(p, context.Background(), "a", Question{Space: "s", Run: "r1", Kind: KindQuestion, Question: "go?",
		Options: []Option{{Label: "yes"}, {Label: "no"}}}, 0)
	q := nextQuestion(t, sub, "go?")
	if err := p.Answer("a", q.ID, Answer{Choices: []int{1}}); err != nil {
		t.Fatal(err)
	}
	wait(t, ch)
	ch = askAsync(p, context.Background(), "a", Question{Space: "s", Run: "r2", Kind: KindQuestion, Question: "stop?",
		Options: []Option{{Label: "yes"}}}, 0)
	nextQuestion(t, sub, "stop?")
	p.CancelRun("r2")
	wait(t, ch)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"a asked r1", "a answered r1", "a asked r2", "a canceled r2"}
	if !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}
