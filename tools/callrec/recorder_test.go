package callrec

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

func rec(tenant, run, tool, args string) tools.CallRecord {
	return tools.CallRecord{
		Run: &tools.Run{ID: run, Tenant: tenant}, Tool: tool, Level: tools.LevelRead,
		Args: json.RawMessage(args), Started: time.Now(), Duration: 1500 * time.Microsecond, Outcome: tools.OutcomeOK,
	}
}

func TestRingKeepsTheLastCallsOfEachRunInOrder(t *testing.T) {
	r := New(WithPerRun(3))
	for i := 1; i <= 5; i++ {
		r.RecordToolCall(rec("acme", "r1", "read", fmt.Sprintf(`{"path":"f%d"}`, i)))
	}
	r.RecordToolCall(rec("acme", "r2", "shell", `{"command":"ls"}`))
	got := r.Calls("acme", "r1")
	if len(got) != 3 {
		t.Fatalf("kept %d calls, want the last 3", len(got))
	}
	for i, c := range got {
		if c.Seq != uint64(i+3) || c.Args != fmt.Sprintf(`path="f%d"`, i+3) {
			t.Fatalf("call %d = seq %d args %q, want seq %d path f%d", i, c.Seq, c.Args, i+3, i+3)
		}
	}
	if c := r.Calls("acme", "r2"); len(c) != 1 || c[0].Tool != "shell" || c[0].DurationMS != 1.5 {
		t.Fatalf("r2's calls %+v", c)
	}
}

func TestRunsAreCappedIdlestFirst(t *testing.T) {
	r := New(WithMaxRuns(2))
	r.RecordToolCall(rec("acme", "old", "read", `{}`))
	r.RecordToolCall(rec("acme", "busy", "read", `{}`))
	r.RecordToolCall(rec("acme", "old", "read", `{}`)) // old is now the latest
	r.RecordToolCall(rec("acme", "new", "read", `{}`))
	if len(r.Calls("acme", "busy")) != 0 {
		t.Fatal("the idlest run was kept past the cap")
	}
	if len(r.Calls("acme", "old")) != 2 || len(r.Calls("acme", "new")) != 1 {
		t.Fatalf("old %d new %d calls, want 2 and 1", len(r.Calls("acme", "old")), len(r.Calls("acme", "new")))
	}
}

func TestTenantsSeeOnlyTheirOwnRuns(t *testing.T) {
	r := New()
	r.RecordToolCall(rec("acme", "r1", "read", `{}`))
	if got := r.Calls("globex", "r1"); len(got) != 0 {
		t.Fatalf("another tenant sees %d calls of acme's run", len(got))
	}
	// A call claiming the same run id for another tenant is not mixed in.
	r.RecordToolCall(rec("globex", "r1", "shell", `{}`))
	if got := r.Calls("acme", "r1"); len(got) != 1 || got[0].Tool != "read" {
		t.Fatalf("acme's run holds %+v", got)
	}
	sub, backlog := r.Subscribe("globex", "r1")
	defer sub.Close()
	if len(backlog) != 0 {
		t.Fatalf("another tenant's subscription got a backlog of %d", len(backlog))
	}
	select {
	case <-sub.Done():
	default:
		t.Fatal("a subscription to another tenant's run stays open")
	}
}

func TestSubscriberGetsBacklogThenLiveCalls(t *testing.T) {
	r := New()
	r.RecordToolCall(rec("acme", "r1", "read", `{}`))
	sub, backlog := r.Subscribe("acme", "r1")
	defer sub.Close()
	if len(backlog) != 1 || backlog[0].Seq != 1 {
		t.Fatalf("backlog %+v", backlog)
	}
	r.RecordToolCall(rec("acme", "r1", "write", `{"path":"a","content":"secret"}`))
	select {
	case c := <-sub.Events():
		if c.Seq != 2 || c.Tool != "write" || strings.Contains(c.Args, "secret") {
			t.Fatalf("live call %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the live call did not arrive")
	}
}

func TestSubscriberBeforeTheFirstCallGetsIt(t *testing.T) {
	r := New()
	sub, backlog := r.Subscribe("acme", "fresh")
	defer sub.Close()
	if len(backlog) != 0 {
		t.Fatalf("backlog %+v", backlog)
	}
	r.RecordToolCall(rec("acme", "fresh", "read", `{}`))
	select {
	case c := <-sub.Events():
		if c.Seq != 1 {
			t.Fatalf("call %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first call of the run did not reach its early subscriber")
	}
}

func TestSlowSubscriberIsDroppedAndNeverBlocksTheCall(t *testing.T) {
	r := New(WithSubscriberBuffer(2))
	slow, _ := r.Subscribe("acme", "r1")
	defer slow.Close()
	fast, _ := r.Subscribe("acme", "r1")
	defer fast.Close()
	got := 0
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := 0; i < 10; i++ {
			r.RecordToolCall(rec("acme", "r1", "read", `{}`))
			// fast reads each call as it comes; slow reads none.
			select {
			case <-fast.Events():
				got++
			case <-time.After(10 * time.Second):
				return
			}
		}
	}()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("recording blocked on a subscriber that does not read")
	}
	if got != 10 {
		t.Fatalf("the reading subscriber got %d of 10 calls", got)
	}
	select {
	case <-slow.Done():
	default:
		t.Fatal("the subscriber that read nothing was not dropped")
	}
	select {
	case <-fast.Done():
		t.Fatal("the subscriber that kept up was dropped")
	default:
	}
	if n := len(slow.Events()); n != 2 {
		t.Fatalf("the dropped subscriber holds %d calls, want its buffer of 2", n)
	}
}

func TestForgetEndsSubscriptions(t *testing.T) {
	r := New()
	r.RecordToolCall(rec("acme", "r1", "read", `{}`))
	sub, _ := r.Subscribe("acme", "r1")
	r.Forget("r1")
	select {
	case <-sub.Done():
	default:
		t.Fatal("the subscription of an ended run stays open")
	}
	if len(r.Calls("acme", "r1")) != 0 {
		t.Fatal("an ended run's calls are kept")
	}
	sub.Close() // after Forget: harmless
}
