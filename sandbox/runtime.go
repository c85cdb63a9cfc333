package sandbox

import "github.com/sandboxd/sandboxd/errdefs"

// Runtimes a sandbox can be made with: the engine's default OCI runtime, or
// gVisor, whose kernel in user space answers the sandbox's system calls so
// that the host kernel sees only gVisor's own narrow set.
const (
	RuntimeRunc   = "runc"
	RuntimeGVisor = "gvisor"
)

// Label keys of a sandbox's isolation, stamped at creation and kept by a
// fork's copies: a restarted sandboxd, a resumed sandbox and GET all read
// them back.
const (
	LabelRuntime      = "io.sandboxd.runtime"        // runc or gvisor
	LabelReadOnlyRoot = "io.sandboxd.read-only-root" // "true" when the root file system is read-only
)

// RuntimeServer is an optional Backend capability: the runtimes the
// backend can make sandboxes with. A backend without it serves runc alone.
type RuntimeServer interface {
	Runtimes() []string
}

// RuntimeRefuser is an optional RuntimeServer capability: why the backend
// does not serve a runtime, in a sentence naming what the operator must
// install or change (nil: the generic refusal will do).
type RuntimeRefuser interface {
	RefuseRuntime(runtime string) error
}

// ServedRuntimes are the runtimes b can make sandboxes with.
func ServedRuntimes(b Backend) []string {
	if rs, ok := b.(RuntimeServer); ok {
		return rs.Runtimes()
	}
	return []string{RuntimeRunc}
}

// ValidateRuntime checks a runtime's name ("" is runc).
func ValidateRuntime(r string) error {
	switch r {
	case "", RuntimeRunc, RuntimeGVisor:
		return nil
	}
	return errdefs.InvalidArgument("runtime %s is not known; use \"runc\" or \"gvisor\"", quoteShort(r))
}

// RuntimeLabels are the labels a backend stamps for spec's runtime and
// root file system.
func RuntimeLabels(spec Spec) map[string]string {
	r := spec.Runtime
	if r == "" {
		r = RuntimeRunc
	}
	l := map[string]string{LabelRuntime: r}
	if spec.ReadOnlyRoot {
		l[LabelReadOnlyRoot] = "true"
	}
	return l
}

// RuntimeOf is the runtime info's sandbox was made with (runc for one
// made before the label).
func RuntimeOf(info Info) string {
	if r := info.Labels[LabelRuntime]; r != "" {
		return r
	}
	return RuntimeRunc
}

// ReadOnlyRootOf reports whether info's sandbox has a read-only root.
func ReadOnlyRootOf(info Info) bool { return info.Labels[LabelReadOnlyRoot] == "true" }

// ReadOnlyRootServer is an optional Backend capability: it can make a
// sandbox whose root file system is read-only (Spec.ReadOnlyRoot).
type ReadOnlyRootServer interface {
	ServesReadOnlyRoot() bool
}

// servesRuntime refuses a runtime the backend cannot make sandboxes with,
// and a read-only root it cannot make.
func (m *Manager) servesRuntime(spec Spec) error {
	if spec.ReadOnlyRoot {
		if s, ok := m.backend.(ReadOnlyRootServer); !ok || !s.ServesReadOnlyRoot() {
			return errdefs.FailedPrecondition("the %s backend of this sandboxd cannot make a sandbox with a read-only root yet; leave read_only_root out (or false)", m.backend.Name())
		}
	}
	r := spec.Runtime
	if r == "" || r == RuntimeRunc {
		return nil
	}
	served := ServedRuntimes(m.backend)
	for _, s := range served {
		if s == r {
			return nil
		}
	}
	if rr, ok := m.backend.(RuntimeRefuser); ok {
		if err := rr.RefuseRuntime(r); err != nil {
			return err
		}
	}
	return errdefs.FailedPrecondition("the %s backend of this sandboxd does not serve runtime %q (it serves %v); ask for one of those", m.backend.Name(), r, served)
}
