package runstore

import (
	"testing"

	"github.com/sandboxd/sandboxd/tools"
)

func TestCreateHookHearsEveryNewRunOnly(t *testing.T) {
	var heard []string
	s := New(WithMaxPerTenant(1), WithCreateHook(func(r tools.Run) { heard = append(heard, r.ID) }))
	r, err := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c1"}); err == nil {
		t.Fatal("a second run past the limit of 1 was created")
	}
	if len(heard) != 1 || heard[0] != r.ID {
		t.Errorf("the hook heard %v, want only %s (a refused run is not new)", heard, r.ID)
	}
}
