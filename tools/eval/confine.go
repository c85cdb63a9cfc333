package eval

import (
	"maps"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/agent/jail"
	"github.com/sandboxd/sandboxd/agent/proto"
)

// confine turns a host kernel's spawn into the same kernel inside a jail:
// the agent runs `sandbox-agent jail ... -- interpreter kernel`, which
// shows the kernel its scratch (the working folder) and its program folder
// and nothing else of the host, as the conversation's own uid. The
// kernel's environment goes to the jail, which starts the kernel with it
// alone: nothing of sandboxd's environment gets in.
func confine(p *place, req *proto.SpawnRequest, programDir string) error {
	spec, err := p.jail()
	if err != nil {
		return err
	}
	spec.Scratch = p.dir
	spec.ReadOnly = append(spec.ReadOnly, programDir)
	spec.Fds = 2 // the protocol pipes, fds 3 and 4
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		spec.Env = append(spec.Env, k+"="+req.Env[k])
	}
	spec.Argv = req.Argv
	req.Argv = append([]string{proto.AgentSelf, "jail"}, spec.Args()...)
	req.Env = nil
	req.Labels = maps.Clone(req.Labels)
	req.Labels[labelJail] = "1"
	return nil
}

// jailWords picks the jail's own error message out of a kernel's output (why it
// could not be confined), or "".
func jailWords(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if why, ok := strings.CutPrefix(strings.TrimSpace(line), jail.Prefix); ok {
			return why
		}
	}
	return ""
}
