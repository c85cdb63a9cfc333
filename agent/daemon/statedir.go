package daemon

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The state dir (WithStateDir) holds what must outlive the agent: the
// commit journals (journal.go), the fencing record (fence.go) and the
// sandbox's environment (procs_env.go).

// writeDurable replaces the file at path by b atomically and durably: a
// daemon killed at any point finds either the old content or the new.
func writeDurable(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".new")
	t, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = t.Write(b)
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}
