package daemon

import (
	"bufio"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The state dir (WithStateDir) holds what must outlive the agent: the
// commit journals (journal.go), the fencing record (fence.go), the
// sandbox's environment (procs_env.go), the next process id
// (procs_long.go) and a hibernation's record (hibernate.go). It must be on
// the sandbox's own file system, which a container keeps across a stop
// and a start (not a tmpfs).

// writeDurable replaces the file at path by b atomically and durably: a
// daemon killed at any point finds either the old content or the new.
func writeDurable(path string, b []byte) error {
	return writeDurableFunc(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// writeDurableFunc is writeDurable of what write writes, through a buffer,
// for a record too large to hold twice in memory.
func writeDurableFunc(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".new")
	t, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(t, 64<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
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
