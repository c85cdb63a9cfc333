package host

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// stopGrace is how long the agent daemon gets to exit after SIGTERM.
const stopGrace = 5 * time.Second

// Remove kills everything the sandbox's agent runs and the agent itself,
// then deletes the folder. A host workspace is never deleted.
func (b *Backend) Remove(ctx context.Context, id string) error {
	m, err := b.load(id)
	if err != nil {
		return err
	}
	if err := b.stopAgent(ctx, m); err != nil {
		return err
	}
	dir := filepath.Join(b.root, id)
	if m.HostWorkspace && strings.HasPrefix(m.Workspace+string(filepath.Separator), dir+string(filepath.Separator)) {
		return errdefs.Internal("refusing to delete %s: it contains the host workspace %s", dir, m.Workspace)
	}
	// meta.json goes first, so a half-deleted folder is no longer listed.
	if err := os.Remove(filepath.Join(dir, "meta.json")); err != nil && !os.IsNotExist(err) {
		return errdefs.Internal("cannot delete sandbox %s: %v", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return errdefs.Internal("cannot delete the folder of sandbox %s: %v; remove %s by hand", id, err, dir)
	}
	if m.SocketDir != "" {
		_ = os.RemoveAll(m.SocketDir)
	}
	return nil
}

// stopAgent connects straight to the daemon's socket (an attach would start
// one), kills the process groups it owns, then terminates the daemon found
// by its hello. No socket or no response means no daemon runs.
func (b *Backend) stopAgent(ctx context.Context, m meta) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "unix", m.Socket)
	if err != nil {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := agent.NewClient(hctx, conn)
	if err != nil {
		b.log.Warn("the agent socket answers but not as an agent; deleting the folder anyway", "sandbox", m.ID, "err", err)
		return nil
	}
	defer c.Close()
	hello, err := c.Hello(hctx)
	if err != nil {
		b.log.Warn("the agent did not say hello; deleting the folder anyway", "sandbox", m.ID, "err", err)
		return nil
	}
	if procs, err := c.List(hctx, &proto.ListRequest{}); err == nil {
		for _, p := range procs {
			if p.Running {
				_ = c.Signal(hctx, &proto.SignalRequest{ID: p.ID, Signal: "KILL", Group: true})
			}
		}
	}
	_ = c.Close()
	if hello.PID <= 1 || hello.PID == os.Getpid() {
		return nil
	}
	return terminate(ctx, hello.PID)
}

// terminate sends SIGTERM, then SIGKILL after stopGrace, and waits (not
// being its parent, by polling) until the process is gone or a zombie.
func terminate(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if gone(ctx, pid, stopGrace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if gone(ctx, pid, 2*time.Second) {
		return nil
	}
	return errdefs.Unavailable("the agent daemon (pid %d) does not exit; kill it and retry the delete", pid)
}

func gone(ctx context.Context, pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if syscall.Kill(pid, 0) != nil || zombie(pid) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reads the state letter from /proc/PID/stat (after the ")" that ends
// the command name, which may itself contain spaces or parentheses).
func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
