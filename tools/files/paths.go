package files

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
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

// execDir is the directory a command runs in: the run's workdir, or
// workdirArg resolved against it, as the agent resolves it. A command takes
// no root, so the directory is confined here: the stat through the agent
// follows symlinks and refuses any that lead out of the workspace. msg is
// the error message for the model; err a failure of the pipe.
func execDir(ctx context.Context, env *tools.Env, conn *tools.SandboxConn, workdirArg string) (dir, msg string, err error) {
	dir = workdir(env, conn)
	if workdirArg != "" {
		if dir, msg = resolve(env, conn, "workdir", workdirArg); msg != "" {
			return "", msg, nil
		}
	}
	st, err := conn.Agent.Stat(ctx, &proto.StatRequest{Root: conn.Workspace, Path: dir})
	if err != nil {
		res, ferr := fail(err)
		if ferr != nil {
			return "", "", ferr
		}
		return "", res.Text(), nil
	}
	if !st.IsDir {
		return "", fmt.Sprintf("workdir %s is not a directory; give a directory inside the workspace", dir), nil
	}
	return st.Path, "", nil
}
