package questions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

// ask runs Ask in the background and returns where its outcome arrives.
type outcome struct {
	q   Question
	r   Resolution
	err error
}

func askAsync(p *Port, ctx context.Context, tenant string, q Question, expiry time.Duration) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		q, r, err := p.Ask(ctx, tenant, q, expiry)
		ch <- outcome{q, r, err}
	}()
	return ch
}

// nextQuestion waits for the next `question` event on s.
func nextQuestion(t *testing.T, s *Subscription, text string) Question {
	t.Helper()
	for {
		select {
		case ev := <-s.Events():
			if ev.Type == EventQuestion && ev.Question.Question == text {
				return *ev.Question
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no question event within 5s")
		}
	}
}

func wait(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("Ask did not return within 5s")
	}
	return outcome{}
}

func TestAskWithoutHumanFailsAtOnce(t *testing.T) {
	p := New()
	_, _, err := p.Ask(context.Background(), "a", Question{Space: "s", Kind: KindQuestion, Question: "ok?"}, 0)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("err = %v, want failed precondition", err)
	}
}

func TestAnswerSkipAndConflict(t *testing.T) {
	p := New()
	sub, pend := p.Subscribe("a", "s")
	defer sub.Close()
	if len(pend) != 0 || !p.Connected("a", "s") || p.Connected("b", "s") {
		t.Fatalf("pending %v connected a=%v b=%v", pend, p.Connected("a", "s"), p.Connected("b", "s"))
	}
	ch := askAsync(p, context.Background(), "a", Question{Space: "s", Run: "r1", Kind: KindQuestion, Question: "which?",
		Options: []Option{{Label: "red"}, {Label: "blue"}, {Label: "green"}}, MultiSelect: true}, 0)
	q := nextQuestion(t, sub, "which?")
	if got := p.Pending("a", "s"); len(got) != 1 || got[0].ID != q.ID {
		t.Fatalf("pending = %+v", got)
	}
	if len(p.Pending("b", "s")) != 0 {
		t.Fatal("another tenant sees the question")
	}
	for _, bad := range []Answer{{Choices: []int{4}}, {Choices: []int{0}}, {Choices: []int{1, 1}}, {Text: "x"}, {}, {Skip: true, Text: "x"}} {
		if err := p.Answer("a", q.ID, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("answer %+v: err = %v, want invalid argument", bad, err)
		}
	}
	if err := p.Answer("b", q.ID, Answer{Choices: []int{1}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("other tenant's answer: %v, want not found", err)
	}
	if err := p.Answer("a", q.ID, Answer{Choices: []int{1, 3}}); err != nil {
		t.Fatal(err)
	}
	o := wait(t, ch)
	if o.err != nil || o.r.Status != StatusAnswered || len(o.r.Choices) != 2 {
		t.Fatalf("outcome %+v", o)
	}
	if got := o.r.Chosen(o.q); len(got) != 2 || got[0] != "1. red" || got[1] != "3. green" {
		t.Fatalf("chosen = %v", got)
	}
	if err := p.Answer("a", q.ID, Answer{Choices: []int{2}}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("second answer: %v, want conflict", err)
	}
	// The stream sees the card resolved.
	select {
	case ev := <-sub.Events():
		if ev.Type != EventResolved || ev.Resolved.ID != q.ID || ev.Resolved.Status != StatusAnswered {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(time.Second):
		t.Fatal("no resolved event")
	}

	ch = askAsync(p, context.Background(), "a", Question{Space: "s", Kind: KindQuestion, Question: "free?"}, 0)
	q = nextQuestion(t, sub, "free?")
	if !q.AllowFreeText || len(q.Options) != 0 {
		t.Fatalf("a question without options must take text: %+v", q)
	}
	if err := p.Answer("a", q.ID, Answer{Skip: true}); err != nil {
		t.Fatal(err)
	}
	if o := wait(t, ch); o.r.Status != StatusSkipped {
		t.Fatalf("outcome %+v", o)
	}
}

func TestExpiryCancelWithdrawClose(t *testing.T) {
	p := New(WithExpiry(50*time.Millisecond, time.Second))
	sub, _ := p.Subscribe("a", "s")
	defer sub.Close()

	o := wait(t, askAsync(p, context.Background(), "a", Question{Space: "s", Kind: KindQuestion, Question: "q"}, 0))
	if o.r.Status != StatusExpired {
		t.Fatalf("outcome %+v, want expired", o)
	}
	if err := p.Answer("a", o.q.ID, Answer{Text: "late"}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("answer after expiry: %v, want conflict", err)
	}

	ch := askAsync(p, context.Background(), "a", Question{Space: "s", Run: "r9", Kind: KindQuestion, Question: "q2"}, time.Minute)
	q := nextQuestion(t, sub, "q2")
	if time.Until(q.ExpiresAt) > 2*time.Second {
		t.Fatalf("expiry %v is not capped at the maximum", time.Until(q.ExpiresAt))
	}
	p.CancelRun("r9")
	if o := wait(t, ch); o.r.Status != StatusCanceled {
		t.Fatalf("outcome %+v, want canceled", o)
	}

	ctx, cancel := context.WithCancel(context.Background())
	ch = askAsync(p, ctx, "a", Question{Space: "s", Kind: KindQuestion, Question: "q3"}, time.Minute)
	nextQuestion(t, sub, "q3")
	cancel()
	if o := wait(t, ch); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("outcome %+v, want canceled ctx", o)
	}
	if len(p.Pending("a", "s")) != 0 {
		t.Fatal("a withdrawn question is still pending")
	}

	ch = askAsync(p, context.Background(), "a", Question{Space: "s", Kind: KindQuestion, Question: "q4"}, time.Minute)
	nextQuestion(t, sub, "q4")
	p.Close()
	if o := wait(t, ch); o.r.Status != StatusExpired {
		t.Fatalf("outcome at close %+v (%v), want expired", o, o.err)
	}
	select {
	case <-sub.Done():
	default:
		t.Fatal("subscription not ended by Close")
	}
	if p.Connected("a", "s") {
		t.Fatal("still connected after Close")
	}
}

func TestSlowSubscriberIsDropped(t *testing.T) {
	p := New(WithMaxPending(2 * subBuffer))
	slow, _ := p.Subscribe("a", "s")
	defer slow.Close()
	fast, _ := p.Subscribe("a", "s")
	defer fast.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Each Ask publishes one event; the slow subscriber never reads.
	for i := 0; i < subBuffer+1; i++ {
		askAsync(p, ctx, "a", Question{Space: "s", Kind: KindQuestion, Question: "q"}, time.Minute)
		<-fast.Events()
	}
	select {
	case <-slow.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a subscriber that does not read was not dropped")
	}
	if !p.Connected("a", "s") {
		t.Fatal("the reading subscriber should keep the space connected")
	}
	fast.Close()
	if p.Connected("a", "s") {
		t.Fatal("connected after every stream closed")
	}
}
