package files

import (
	"encoding/json"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/tools"
)

// workdir is the run's working directory as an absolute path in the
// sandbox, as the call's handle has it (tools.Open).
func workdir(_ *tools.Env, conn *tools.SandboxConn) string { return conn.Abs(".") }

// resolve maps a path argument to an absolute path inside the workspace by
// the handle's one rule (tools.SandboxConn.Resolve); the message, when not
// "", is the error message for the model.
func resolve(_ *tools.Env, conn *tools.SandboxConn, arg, p string) (string, string) {
	abs, err := conn.Resolve(arg, p)
	if err != nil {
		return "", err.Error()
	}
	return abs, ""
}

// pathScope is the scope (tools.Scoped) of a call that changes the file
// named by its "path" argument: the file's base name, which every spelling
// of the path shares. A call whose path cannot be read takes the whole
// conversation's turn; the tool then says what is wrong with it.
func pathScope(raw json.RawMessage) ([]string, bool) {
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return nil, false
	}
	base := path.Base(strings.TrimRight(a.Path, "/"))
	if base == "" || base == "." || base == "/" || base == ".." {
		return nil, false
	}
	return []string{base}, true
}
