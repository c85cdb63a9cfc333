package lsp

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
		wd := path.Clean(env.Run.Workdir)
		if within(ws, wd) {
			return wd
		}
		return ws
	}
	return path.Join(ws, env.Run.Workdir)
}

// resolve maps a file argument to an absolute path inside the workspace;
// the message, when not "", is the sentence for the model.
func resolve(env *tools.Env, conn *tools.SandboxConn, p string) (string, string) {
	ws := path.Clean(conn.Workspace)
	wd := workdir(env, conn)
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Sprintf("file %q contains a NUL byte; give a plain path inside the workspace %s", p, ws)
	}
	abs := p
	if !path.IsAbs(p) {
		abs = path.Join(wd, p)
	}
	abs = path.Clean(abs)
	if !within(ws, abs) {
		return "", fmt.Sprintf("file %q is outside the workspace %s (it resolves to %s); give a path inside the workspace", p, ws, abs)
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

// relTo shows p relative to the workdir when inside it, relative to the
// workspace when inside that, and absolute otherwise (a library's source).
func relTo(wd, ws string) func(string) string {
	return func(p string) string {
		switch {
		case p == wd:
			return "."
		case within(wd, p):
			return strings.TrimPrefix(p, wd+"/")
		case within(ws, p) && wd != ws:
			return p
		}
		return p
	}
}
