package daemon

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// The sandbox's environment (proto.OpSetEnv): what the claim of a pool
// sandbox adds to every command the daemon starts afterwards, since the
// container's own environment was fixed when it was made for no one. It
// is set once, before any command ran, so that no process of the sandbox
// ever saw another environment, and a sandbox never carries one tenant's
// values into another's commands.

// sandboxEnvFile holds the recorded environment in the state dir.
const sandboxEnvFile = "env.json"

// sandboxEnv is the environment every command gets under its own.
type sandboxEnv struct {
	path   string // the record in the state dir; "" keeps it in memory only
	broken error  // why the record cannot be read; every command fails with it

	// mu guards env, egress, set and started.
	mu      sync.Mutex
	env     map[string]string
	egress  map[string]string // the egress proxy's variables (egress.go), over env
	set     bool              // a SetEnv was accepted (by this daemon or a predecessor)
	started bool              // this daemon started a command
}

// openSandboxEnv loads the environment a previous daemon recorded in
// stateDir ("": none).
func openSandboxEnv(stateDir string) *sandboxEnv {
	e := &sandboxEnv{}
	if stateDir == "" {
		return e
	}
	e.path = filepath.Join(stateDir, sandboxEnvFile)
	b, err := os.ReadFile(e.path)
	if errors.Is(err, os.ErrNotExist) {
		return e
	}
	var env map[string]string
	if err == nil {
		err = json.Unmarshal(b, &env)
	}
	if err == nil {
		err = validEnv(env)
	}
	if err != nil {
		e.broken = errdefs.Unavailable("the agent cannot read the sandbox's environment %s (%v), so it starts no command without it; "+
			"fix the state directory, or recreate the sandbox", e.path, err)
		return e
	}
	e.env, e.set = env, true
	return e
}

// apply records r's environment, or refuses: after a command ran, or
// when other values were set already.
func (e *sandboxEnv) apply(r *proto.SetEnvRequest) error {
	if err := validEnv(r.Env); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.broken != nil:
		return e.broken
	case e.set && maps.Equal(e.env, r.Env):
		return nil // a retry of the claim that set it
	case e.set:
		return errdefs.FailedPrecondition("the sandbox's environment was set already (%s); it is set once, when the sandbox is claimed, so create a new sandbox for other values",
			strings.Join(slices.Sorted(maps.Keys(e.env)), ", "))
	case e.started:
		return errdefs.FailedPrecondition("the sandbox has run commands already, so its environment cannot be set any more; it is set once, when the sandbox is claimed, so create a new sandbox for other values")
	}
	if e.path != "" {
		b, _ := json.Marshal(r.Env)
		// Recorded before the response: a restarted daemon must apply
		// what the claim was told it set.
		if err := writeDurable(e.path, b); err != nil {
			return errdefs.Unavailable("the agent cannot record the sandbox's environment in %s (%v); check the agent's state directory and retry", e.path, err)
		}
	}
	e.env, e.set = maps.Clone(r.Env), true
	return nil
}

// forCommand returns the environment a command starting now gets, and
// marks the sandbox as having started one.
func (e *sandboxEnv) forCommand() (map[string]string, error) {
	if e.broken != nil {
		return nil, e.broken
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = true
	if len(e.egress) == 0 {
		return e.env, nil
	}
	all := maps.Clone(e.env)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, e.egress)
	return all, nil
}

// setEgress sets the egress proxy's variables for every command started
// from now on. Unlike the claim's environment they may be set again: a
// new session re-enables the proxy, with the same port.
func (e *sandboxEnv) setEgress(env map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.egress = maps.Clone(env)
}

// validEnv checks every name and value of env.
func validEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return errdefs.InvalidArgument("environment variable %q is not valid; names must be non-empty without '=' or NUL, and values without NUL", k)
		}
	}
	return nil
}
