package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// AgentOf takes a looked-up sandbox by its id: it shares the pipe Agent
// opens, and a sandbox deleted (or another tenant's id) since the lookup
// is NotFound saying it is gone, not a pipe to whatever the conversation
// holds now.
func TestAgentOfTakesTheLookedUpSandbox(t *testing.T) {
	f := newFake(t)
	m := startManager(t, f)
	ctx := testCtx(t)
	info, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	c1, _, err := m.Agent(ctx, "acme", "c1")
	if err != nil {
		t.Fatal(err)
	}
	c2, got, err := m.AgentOf(ctx, info)
	if err != nil || c2 != c1 || got.ID != info.ID {
		t.Fatalf("AgentOf = %p %s %v, want the open pipe %p of %s", c2, got.ID, err, c1, info.ID)
	}
	other := info
	other.Tenant = "globex"
	if _, _, err := m.AgentOf(ctx, other); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("AgentOf with another tenant: %v, want NotFound", err)
	}
	if err := m.Delete(ctx, "acme", info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	_, _, err = m.AgentOf(ctx, info)
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("AgentOf of a deleted sandbox whose conversation has a new one: %v, want NotFound saying it is gone", err)
	}
}
