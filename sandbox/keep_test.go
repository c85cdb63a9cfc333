package sandbox

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
)

// A kept sandbox gets a pipe with no call asking for one, and a new one at
// the next refresh after it dropped; another sandbox gets none.
func TestKeepAttachedOpensPipesWithoutCalls(t *testing.T) {
	f := newFake(t)
	var kept, other atomic.Int32
	m := startManager(t, f, WithRefreshInterval(50*time.Millisecond),
		WithAttachHook(func(ctx context.Context, info Info, c *agent.Client) error {
			if info.Conversation == "kept" {
				kept.Add(1)
			} else {
				other.Add(1)
			}
			return nil
		}))
	ctx := testCtx(t)
	if _, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "kept"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, Spec{Tenant: "t", Conversation: "other"}); err != nil {
		t.Fatal(err)
	}
	m.SetKeepAttached(func(i Info) bool { return i.Conversation == "kept" })
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitUntil("a pipe to the kept sandbox", func() bool { return kept.Load() == 1 })

	c, _, err := m.Agent(ctx, "t", "kept")
	if err != nil {
		t.Fatal(err)
	}
	if kept.Load() != 1 {
		t.Fatalf("a call opened another pipe to the kept sandbox (%d attaches); it should use the kept one", kept.Load())
	}
	c.Close()
	waitUntil("the dropped pipe opened again", func() bool { return kept.Load() == 2 })
	time.Sleep(200 * time.Millisecond) // a few refreshes
	if n := other.Load(); n != 0 {
		t.Fatalf("a sandbox nobody keeps got %d pipes", n)
	}
	m.SetKeepAttached(nil)
}
