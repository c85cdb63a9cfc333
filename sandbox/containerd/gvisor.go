package containerd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/api/types/runc/options"
	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A gVisor sandbox runs under the same runc shim as a runc one, with runsc
// as the shim's OCI runtime binary: runsc takes runc's command line. The
// runsc Debian ships (0.0~20221219) starts a container only with its own
// networking off, and the shim's options name a binary but take no
// arguments, so the binary the shim is given is a two-line script that runs
// runsc with --network=none. Every sandbox here has a bare network
// namespace anyway (no CNI), so nothing is lost. The script also says
// --overlay2=none, the default of that runsc: the sandbox's writes outside
// the workspace must land in the container's snapshot, where hibernation
// keeps them and snapshots read them, not in memory as newer runsc
// releases do by default.

// DefaultRunsc is the name gVisor's runtime binary is looked up by in PATH.
const DefaultRunsc = "runsc"

// runscCheckTimeout bounds the start-time check that the script runs runsc.
const runscCheckTimeout = 10 * time.Second

var (
	_ sandbox.RuntimeServer  = (*Backend)(nil)
	_ sandbox.RuntimeRefuser = (*Backend)(nil)
)

// WithRunsc names gVisor's runsc binary (default: DefaultRunsc, looked up
// in PATH when the backend is made). Without a runsc that runs, the
// backend serves runc alone.
func WithRunsc(path string) Option { return func(b *Backend) { b.runsc = path } }

// runscScript is where the script that runs runsc for the shim lives; it is
// rewritten at every start, so that it follows runsc when runsc moves.
func (b *Backend) runscScript() string {
	return filepath.Join(b.dataDir, "containerd", "runsc-network-none")
}

// setupGVisor finds runsc and writes the script the shim runs for gVisor
// sandboxes; what goes wrong is kept as the sentence a gVisor create is
// refused with. It never fails New: runc sandboxes do not need it.
func (b *Backend) setupGVisor(ctx context.Context) {
	path, err := exec.LookPath(b.runsc)
	if err != nil {
		b.gvisorErr = errdefs.FailedPrecondition("the containerd backend cannot run gVisor sandboxes: runsc was not found (looked for %q: %v); the operator must install gVisor's runsc (Debian: apt-get install runsc) and restart sandboxd, or ask for runtime runc", b.runsc, unwrapExec(err))
		return
	}
	if path, err = filepath.Abs(path); err != nil {
		b.gvisorErr = errdefs.FailedPrecondition("the containerd backend cannot run gVisor sandboxes: the path of runsc cannot be made absolute (%v); configure it by an absolute path", err)
		return
	}
	script := b.runscScript()
	if err := writeScript(script, "#!/bin/sh\nexec "+shellQuote(path)+" --network=none --overlay2=none \"$@\"\n"); err != nil {
		b.gvisorErr = errdefs.FailedPrecondition("the containerd backend cannot run gVisor sandboxes: the script that starts runsc cannot be written to %s (%v); check that the data dir is writable", script, err)
		return
	}
	// The shim executes the script: a data dir mounted noexec, or a runsc
	// that does not run on this host, shows here rather than at a create.
	cctx, cancel := context.WithTimeout(ctx, runscCheckTimeout)
	defer cancel()
	if out, err := exec.CommandContext(cctx, script, "--version").CombinedOutput(); err != nil {
		b.gvisorErr = errdefs.FailedPrecondition("the containerd backend cannot run gVisor sandboxes: %s --version failed (%v: %s); check that runsc runs on this host and that the data dir is not mounted noexec", script, err, firstLine(out))
		return
	}
	b.gvisorScript = script
	b.log.Info("gVisor sandboxes run under the runc shim with runsc", "runsc", path, "script", script)
}

// writeScript replaces path with an executable file holding text in one
// rename, so that a shim running it meanwhile sees the old or the new one.
func writeScript(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(text), 0o755); err != nil {
		return err
	}
	// WriteFile's mode is cut by the umask; the shim needs it executable.
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// shellQuote quotes s for sh, whatever it holds.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// unwrapExec drops exec's repetition of the name from a lookup error.
func unwrapExec(err error) error {
	if e, ok := err.(*exec.Error); ok {
		return e.Err
	}
	return err
}

// Runtimes are runc, and gVisor where runsc was found and runs.
func (b *Backend) Runtimes() []string {
	if b.gvisorScript == "" {
		return []string{sandbox.RuntimeRunc}
	}
	return []string{sandbox.RuntimeRunc, sandbox.RuntimeGVisor}
}

// RefuseRuntime says why a runtime is not served: for gVisor, what the
// operator must install.
func (b *Backend) RefuseRuntime(r string) error {
	if r == sandbox.RuntimeGVisor && b.gvisorErr != nil {
		return b.gvisorErr
	}
	return nil
}

// CheckGVisor says, in a sentence for the operator, whether gVisor
// sandboxes can be made (sandboxd warns at start when its config asks for
// them and they cannot).
func (b *Backend) CheckGVisor(context.Context) error { return b.gvisorErr }

// withRuntime picks the shim of spec's runtime: the configured one for
// runc, the runc shim running runsc through the script for gVisor.
func (b *Backend) withRuntime(spec sandbox.Spec) (containerd.NewContainerOpts, error) {
	switch spec.Runtime {
	case "", sandbox.RuntimeRunc:
		return containerd.WithRuntime(b.runtime, nil), nil
	case sandbox.RuntimeGVisor:
		if b.gvisorScript == "" {
			return nil, b.gvisorErr
		}
		return containerd.WithRuntime(DefaultRuntime, &options.Options{BinaryName: b.gvisorScript}), nil
	}
	return nil, sandbox.ValidateRuntime(spec.Runtime)
}

// withProcessKill is containerd.WithProcessKill (a task delete option) for
// a task whose init may have exited already. Signalling a stopped task
// fails under runsc ("sandbox is not running"), where the shim reads runc's
// refusal as not found; so a task found stopped, before or after the
// signal, counts as killed.
func withProcessKill(ctx context.Context, p containerd.Process) error {
	if stopped(ctx, p) {
		return nil
	}
	err := containerd.WithProcessKill(ctx, p)
	if err != nil && stopped(ctx, p) {
		return nil
	}
	return err
}

// killStopped reads an error of signalling task p: none when p has stopped.
func killStopped(ctx context.Context, p containerd.Process, err error) error {
	if err == nil || cerrdefs.IsNotFound(err) || stopped(ctx, p) {
		return nil
	}
	return err
}

func stopped(ctx context.Context, p containerd.Process) bool {
	st, err := p.Status(ctx)
	return err == nil && st.Status == containerd.Stopped
}
