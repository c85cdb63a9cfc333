package debug

import (
	"context"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// projectRoot is the directory a program is built and run from: the one
// holding its nearest root marker (go.mod, pyproject.toml, Cargo.toml, …),
// so a module in a subdirectory of the working directory builds as its
// own; the working directory when that marker lies outside the workspace.
func (c *call) projectRoot(markerDir string) string {
	if markerDir != "" && c.inWorkspace(markerDir) {
		return markerDir
	}
	return c.root
}

func (c *call) inWorkspace(p string) bool {
	ws := strings.TrimSuffix(path.Clean(c.conn.Workspace), "/")
	p = path.Clean(p)
	return p == ws || strings.HasPrefix(p, ws+"/")
}

// listenerCwdScript prints the working directory of the process listening
// on TCP port $1 (any address), from /proc: the socket's inode in
// /proc/net/tcp{,6}, then the process holding it.
const listenerCwdScript = `port=$(printf '%04X' "$1")
inode=$(awk -v p="$port" '$4 == "0A" { split($2, a, ":"); if (toupper(a[2]) == p) { print $10; exit } }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
[ -n "$inode" ] || exit 0
for fd in /proc/[0-9]*/fd/*; do
  if [ "$(readlink "$fd" 2>/dev/null)" = "socket:[$inode]" ]; then
    pid=${fd#/proc/}; pid=${pid%%/*}
    readlink "/proc/$pid/cwd"
    exit 0
  fi
done
true`

// listenerDir is the working directory of the program listening on port
// inside the sandbox, when it lies in the workspace: attach looks for the
// project's root marker from there ("" when unknown).
func (c *call) listenerDir(ctx context.Context, port int) string {
	res, err := c.conn.Agent.Exec(ctx, &proto.ExecRequest{Argv: []string{"/bin/sh", "-c", listenerCwdScript, "sh", strconv.Itoa(port)}, Timeout: 10 * time.Second})
	if err != nil || res.ExitCode != 0 {
		return ""
	}
	dir := strings.TrimSpace(string(res.Stdout))
	if dir == "" || !path.IsAbs(dir) || !c.inWorkspace(dir) {
		return ""
	}
	return dir
}
