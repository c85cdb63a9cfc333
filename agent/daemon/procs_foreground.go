package daemon

import (
	"context"
	"os"

	"github.com/sandboxd/sandboxd/errdefs"
)

// RunForeground runs argv with the given stdio in its own process group as
// a child the Server owns (Close kills it), and returns its exit code
// (128+signal when signalled). Cancelling ctx kills the group. It is how a
// container's init runs its main command without the reaper taking its status.
func (s *Server) RunForeground(ctx context.Context, argv []string, stdin, stdout, stderr *os.File) (int, error) {
	cmd, err := buildCmd(argv, "", nil, nil) // the container's own command: before any claim
	if err != nil {
		return 0, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errdefs.Unavailable("the agent daemon is shutting down")
	}
	exited, err := s.reaper.start(cmd)
	if err != nil {
		s.mu.Unlock()
		return 0, startError(argv[0], err)
	}
	pgid := cmd.Process.Pid
	s.execs[pgid] = runningExec{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.execs, pgid)
		s.mu.Unlock()
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
