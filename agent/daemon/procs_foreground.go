package daemon

import (
	"context"
	"os"

	"github.com/sandboxd/sandboxd/errdefs"
)

// runForeground runs argv as a child the service owns (Server.RunForeground).
func (ps *processService) runForeground(ctx context.Context, argv []string, stdin, stdout, stderr *os.File) (int, error) {
	cmd, err := buildCmd(argv, "", nil, nil) // the container's own command: before any claim
	if err != nil {
		return 0, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		return 0, errdefs.Unavailable("the agent daemon is shutting down")
	}
	exited, err := ps.reaper.start(cmd)
	if err != nil {
		ps.mu.Unlock()
		return 0, startError(argv[0], err)
	}
	pgid := cmd.Process.Pid
	ps.execs[pgid] = runningExec{}
	ps.mu.Unlock()
	defer func() {
		ps.mu.Lock()
		delete(ps.execs, pgid)
		ps.mu.Unlock()
		cmd.Process.Release()
	}()
	var es exitStatus
	select {
	case es = <-exited:
	case <-ctx.Done():
		killGroup(pgid)
		es = <-exited
	}
	code, _ := exitFields(es.ws)
	return code, nil
}
