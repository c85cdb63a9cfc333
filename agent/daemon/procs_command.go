package daemon

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/errdefs"
)

// buildCmd prepares argv to run in its own process group with the
// sandbox's environment (sandboxEnv) added to the daemon's, and env over
// both: exec.Cmd keeps the last value of a name.
func buildCmd(argv []string, dir string, sandboxEnv, env map[string]string) (*exec.Cmd, error) {
	return buildCmdAs(argv, dir, sandboxEnv, env, nil)
}

// buildCmdAs is buildCmd for a command run as the account as (nil: the
// agent's own user, as buildCmd): with its credential, who it is in the
// environment between the sandbox's and env, and without dir its home.
// Whoever replaces the command's SysProcAttr keeps its Credential.
func buildCmdAs(argv []string, dir string, sandboxEnv, env map[string]string, as *account) (*exec.Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errdefs.InvalidArgument("argv is empty; give the program and its arguments")
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, errdefs.InvalidArgument("argument %q contains a NUL byte; arguments must be plain strings", a)
		}
	}
	if dir == "" && as != nil {
		dir = as.dir()
	}
	if dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, errdefs.NotFound("working directory %q does not exist or is not a directory; give an existing directory", dir)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if cmd.Err != nil && !errors.Is(cmd.Err, exec.ErrDot) {
		return nil, startError(argv[0], cmd.Err)
	}
	cmd.Err = nil
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(sandboxEnv)) {
		cmd.Env = append(cmd.Env, k+"="+sandboxEnv[k])
	}
	if as != nil {
		cmd.Env = append(cmd.Env, as.env()...)
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, errdefs.InvalidArgument("environment variable %q is not valid; names must be non-empty without '=' or NUL", k)
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as.credential()}
	return cmd, nil
}

// startErrorAs is startError for a command run as the account as: a
// permission it lacks is the account's, which may not run the program or
// enter the directory even where root could.
func startErrorAs(prog string, as *account, err error) error {
	if as != nil && errors.Is(err, fs.ErrPermission) {
		return errdefs.FailedPrecondition("cannot start %q as user %q: permission denied; check that the account may execute it and enter the working directory", prog, as.name)
	}
	return startError(prog, err)
}

// startError explains why a program could not start.
func startError(prog string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return errdefs.NotFound("program %q was not found on the sandbox's PATH; install it or give its full path", prog)
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.NotFound("cannot start %q: %v; check the program and the working directory", prog, err)
	case errors.Is(err, fs.ErrPermission):
		return errdefs.FailedPrecondition("cannot start %q: permission denied; check that it is executable", prog)
	case errors.Is(err, syscall.EAGAIN):
		return errdefs.ResourceExhausted("cannot start %q: the sandbox has no process left (its pids limit is reached); stop processes it no longer needs and retry", prog)
	default:
		return errdefs.FailedPrecondition("cannot start %q: %v", prog, err)
	}
}
