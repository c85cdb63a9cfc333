package lsp

import (
	"github.com/sandboxd/sandboxd/tools"
)

// workdir is the run's working directory as an absolute path in the
// sandbox, as the call's handle has it (tools.Open).
func workdir(_ *tools.Env, conn *tools.SandboxConn) string { return conn.Abs(".") }

// resolve maps a file argument to an absolute path inside the workspace by
// the handle's one rule; the message, when not "", is the error message
// for the model.
func resolve(_ *tools.Env, conn *tools.SandboxConn, p string) (string, string) {
	abs, err := conn.Resolve("file", p)
	if err != nil {
		return "", err.Error()
	}
	return abs, ""
}

// within reports whether p is root or below it; both are clean and absolute.
func within(root, p string) bool { return tools.Within(root, p) }

// relTo shows p relative to the workdir when inside it, and absolute
// otherwise (elsewhere in the workspace, or a library's source).
func relTo(wd, ws string) func(string) string {
	return (&tools.SandboxConn{Workspace: ws, Workdir: wd}).Rel
}
