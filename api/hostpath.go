package api

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// HostPaths decides which host directories may become a workspace.
type HostPaths struct {
	// Allowed are directories under which a host_path may lie.
	Allowed []string
	// AnyForTenant, when set, may name any directory: the admin tenant when
	// sandboxd runs with no config file at all (a laptop).
	AnyForTenant string
}

// Check returns the directory that p names, with symlinks resolved, when
// tenant may use it. Symlinks are resolved before the allow-list check so a
// link inside an allowed directory cannot point out of it.
func (h HostPaths) Check(tenant, p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", errdefs.InvalidArgument("workspace.host_path %q is not absolute; give the full path of a host directory", p)
	}
	if filepath.Clean(p) != p {
		return "", errdefs.InvalidArgument("workspace.host_path %q is not in clean form; send %q", p, filepath.Clean(p))
	}
	any := h.AnyForTenant != "" && tenant == h.AnyForTenant
	// Refuse before touching the filesystem, so that a tenant cannot probe
	// which host paths exist outside its allowed directories.
	if !any && !under(p, h.Allowed, false) {
		return "", h.refuse(p)
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errdefs.InvalidArgument("workspace.host_path %q does not exist; create the directory first", p)
	}
	if err != nil {
		return "", errdefs.InvalidArgument("workspace.host_path %q cannot be resolved: %v", p, err)
	}
	if !any && !under(real, h.Allowed, true) {
		return "", errdefs.FailedPrecondition("workspace.host_path %q resolves to %q, which is not under allowed_host_paths; use a directory under %s", p, real, strings.Join(h.Allowed, ", "))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", errdefs.InvalidArgument("workspace.host_path %q cannot be read: %v", p, err)
	}
	if !fi.IsDir() {
		return "", errdefs.InvalidArgument("workspace.host_path %q is not a directory; name the directory to use as the workspace", p)
	}
	return real, nil
}

func (h HostPaths) refuse(p string) error {
	if len(h.Allowed) == 0 {
		return errdefs.FailedPrecondition("workspace.host_path %q is refused: the config's allowed_host_paths is empty; an operator must list the directories that may be used", p)
	}
	return errdefs.FailedPrecondition("workspace.host_path %q is not under allowed_host_paths; use a directory under %s", p, strings.Join(h.Allowed, ", "))
}

// under reports whether p is one of dirs or inside one. With resolve, each
// dir's own symlinks are resolved too (e.g. /tmp -> /private/tmp).
func under(p string, dirs []string, resolve bool) bool {
	for _, d := range dirs {
		if resolve {
			if r, err := filepath.EvalSymlinks(d); err == nil {
				d = r
			}
		}
		rel, err := filepath.Rel(d, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}
