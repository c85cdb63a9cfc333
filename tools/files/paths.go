package files

import (
	"fmt"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/tools"
)

// workdir is the run's working directory as an absolute path in the sandbox.
func workdir(env *tools.Env, conn *tools.SandboxConn) string {
	ws := path.Clean(conn.Workspace)
	if env.Run == nil || env.Run.Workdir == "" {
		return ws
	}
	if path.IsAbs(env.Run.Workdir) {
		return path.Clean(env.Run.Workdir)
	}
	return path.Join(ws, env.Run.Workdir)
}

// resolve maps a path argument to an absolute path inside the workspace,
// lexically. It returns a sentence for the model when the path leaves the
// workspace; symlinks are the agent's to judge, since only it sees them.
func resolve(env *tools.Env, conn *tools.SandboxConn, arg, p string) (string, string) {
	ws := path.Clean(conn.Workspace)
	wd := workdir(env, conn)
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Sprintf("%s %q contains a NUL byte; give a plain path inside the workspace %s", arg, p, ws)
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		return "", fmt.Sprintf("%s %q uses ~, which is not expanded; give a path relative to the workdir %s or an absolute path inside the workspace %s", arg, p, wd, ws)
	}
	abs := p
	if !path.IsAbs(p) {
		abs = path.Join(wd, p)
	}
	abs = path.Clean(abs)
	if !within(ws, abs) {
		if path.IsAbs(p) {
			return "", fmt.Sprintf("%s %q is outside the workspace %s; give a path inside it", arg, p, ws)
		}
		if wd == ws {
			return "", fmt.Sprintf("%s %q leaves the workspace %s (it resolves to %s); give a path inside the workspace", arg, p, ws, abs)
		}
		return "", fmt.Sprintf("%s %q leaves the workspace %s (from the workdir %s it resolves to %s); give a path inside the workspace", arg, p, ws, wd, abs)
	}
	return abs, ""
}

// within reports whether p is root or below it; both are clean and absolute.
func within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}
