package files

import (
	"github.com/sandboxd/sandboxd/tools"
)

// workdir is the run's working directory as an absolute path in the
// sandbox, as the call's handle has it (tools.Open).
func workdir(_ *tools.Env, conn *tools.SandboxConn) string { return conn.Abs(".") }

// resolve maps a path argument to an absolute path inside the workspace by
// the handle's one rule (tools.SandboxConn.Resolve); the message, when not
// "", is the sentence for the model.
func resolve(_ *tools.Env, conn *tools.SandboxConn, arg, p string) (string, string) {
	abs, err := conn.Resolve(arg, p)
	if err != nil {
		return "", err.Error()
	}
	return abs, ""
}
