package files

import (
	"testing"

	"github.com/sandboxd/sandboxd/tools"
)

// Every file tool's spec passes the registry's checks (its schema
// included): a bad one panics the daemon at start-up.
func TestToolsRegister(t *testing.T) {
	r := tools.NewRegistry()
	for _, tl := range Tools() {
		r.Register(tl)
	}
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"read", "write", "edit", "apply_patch", "shell", "process"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("tool %s is not registered (have %v)", want, names)
		}
	}
}
