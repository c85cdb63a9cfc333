// Package apitest holds an in-memory sandbox manager for tests of the API,
// its client and the command line: it keeps sandboxes in a map and has no
// agent, so tools that need a pipe get a clear error.
package apitest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Sandboxes is an in-memory api.Sandboxes.
type Sandboxes struct {
	// Workspace is the Info.Workspace of created sandboxes.
	Workspace string

	mu   sync.Mutex // guards byID and n
	byID map[string]sandbox.Info
	n    int
}

var _ api.Sandboxes = (*Sandboxes)(nil)

// New returns an empty manager whose sandboxes have their workspace at /workspace.
func New() *Sandboxes {
	return &Sandboxes{Workspace: "/workspace", byID: map[string]sandbox.Info{}}
}

// Create adds a running sandbox; a second one for a conversation is a Conflict.
func (s *Sandboxes) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	if err := sandbox.ValidateConversation(spec.Conversation); err != nil {
		return sandbox.Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.byID {
		if in.Tenant == spec.Tenant && in.Conversation == spec.Conversation {
			return sandbox.Info{}, errdefs.Conflict("conversation %s already has a sandbox (%s); use it, or delete it before creating another", spec.Conversation, in.ID)
		}
	}
	s.n++
	in := sandbox.Info{
		ID: fmt.Sprintf("mem-%d", s.n), Tenant: spec.Tenant, Conversation: spec.Conversation, Backend: "memory",
		Image: spec.Image, State: sandbox.StateRunning, CreatedAt: time.Now().UTC(), Workspace: s.Workspace,
	}
	if spec.HostWorkspace != "" {
		in.Workspace = spec.HostWorkspace
	}
	s.byID[in.ID] = in
	return in, nil
}

// Get returns the tenant's sandbox.
func (s *Sandboxes) Get(ctx context.Context, tenant, id string) (sandbox.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.byID[id]
	if !ok || in.Tenant != tenant {
		return sandbox.Info{}, errdefs.NotFound("sandbox %s does not exist", id)
	}
	return in, nil
}

// List returns the tenant's sandboxes, oldest first.
func (s *Sandboxes) List(ctx context.Context, tenant, conversation string) ([]sandbox.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sandbox.Info
	for _, in := range s.byID {
		if in.Tenant == tenant && (conversation == "" || in.Conversation == conversation) {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Lookup returns the conversation's sandbox, NotFound when it has none.
func (s *Sandboxes) Lookup(ctx context.Context, tenant, conversation string) (sandbox.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.byID {
		if in.Tenant == tenant && in.Conversation == conversation {
			return in, nil
		}
	}
	return sandbox.Info{}, errdefs.NotFound("conversation %s has no sandbox", conversation)
}

// Delete removes the tenant's sandbox.
func (s *Sandboxes) Delete(ctx context.Context, tenant, id string) error {
	if _, err := s.Get(ctx, tenant, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
	return nil
}

// Agent has no agent to offer: in-memory sandboxes run nothing.
func (s *Sandboxes) Agent(ctx context.Context, tenant, conversation string) (*agent.Client, sandbox.Info, error) {
	in, err := s.Lookup(ctx, tenant, conversation)
	if err != nil {
		return nil, sandbox.Info{}, err
	}
	return nil, in, errdefs.Unavailable("in-memory sandbox %s has no agent", in.ID)
}

// Len returns the number of sandboxes.
func (s *Sandboxes) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
