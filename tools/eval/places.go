package eval

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// maxPlaceFile caps one record read back from disk.
const maxPlaceFile = 4 << 10

// placeLog remembers where each conversation's kernels were started — a
// sandbox by id, or the host — one small file per owner under dir, so that
// a kernel whose sandbox disappeared (deleted, removed behind sandboxd's
// back, before or after a restart) is reported instead of quietly replaced
// by a kernel somewhere else. With no dir it remembers in memory only.
type placeLog struct {
	dir string

	// mu guards known: owner -> place key ("" when none is recorded).
	mu    sync.Mutex
	known map[string]string
}

func newPlaceLog(dir string) *placeLog { return &placeLog{dir: dir, known: map[string]string{}} }

// get returns where owner's kernels were last started ("" if unknown).
func (l *placeLog) get(owner string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if key, ok := l.known[owner]; ok {
		return key
	}
	key := ""
	if l.dir != "" {
		if f, err := os.Open(filepath.Join(l.dir, owner)); err == nil {
			b, _ := io.ReadAll(io.LimitReader(f, maxPlaceFile))
			f.Close()
			key = strings.TrimSpace(string(b))
		}
	}
	l.known[owner] = key
	return key
}

// set records that owner's kernels run at key now.
func (l *placeLog) set(owner, key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known[owner] == key {
		return nil
	}
	if l.dir != "" {
		if err := writeAtomic(l.dir, owner, []byte(key+"\n")); err != nil {
			return err
		}
	}
	l.known[owner] = key
	return nil
}

// clear forgets owner's place (its kernels are gone).
func (l *placeLog) clear(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dir != "" {
		_ = os.Remove(filepath.Join(l.dir, owner))
	}
	l.known[owner] = ""
}

func writeAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot make the kernel places folder %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return fmt.Errorf("cannot record where the kernel runs: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cannot record where the kernel runs: %w", err)
	}
	return nil
}

// sandboxOf is the sandbox id of a place key ("" for the host).
func sandboxOf(key string) string {
	id, ok := strings.CutPrefix(key, "sandbox/")
	if !ok {
		return ""
	}
	return id
}

// movedNote tells the model that the conversation's kernels are no longer
// where they were started, so their state is gone; the cell was not run.
func movedNote(prev, now string) string {
	was, is := sandboxOf(prev), sandboxOf(now)
	switch {
	case was != "" && is == "":
		return fmt.Sprintf("The sandbox %s that this conversation's kernels ran in is gone, and the kernels' state (variables, imports, loaded data) went with it. This cell was not run. Calling eval again starts a new kernel on the host, which has none of the sandbox's files; to run in a sandbox instead, create one for this conversation first.", was)
	case was != "":
		return fmt.Sprintf("The sandbox %s that this conversation's kernels ran in is gone, and the kernels' state (variables, imports, loaded data) went with it; the conversation now has sandbox %s. This cell was not run; call eval again to start a new kernel there.", was, is)
	default:
		return fmt.Sprintf("This conversation's kernels ran on the host; it now has sandbox %s, where eval runs from now on, and the host kernels' state (variables, imports, loaded data) does not come along: they were stopped. This cell was not run; call eval again to start a new kernel in the sandbox.", is)
	}
}

// goneNoHost is movedNote for a conversation whose sandbox is gone where
// host kernels are off.
func goneNoHost(prev string) string {
	return fmt.Sprintf("The sandbox %s that this conversation's kernels ran in is gone, and the kernels' state (variables, imports, loaded data) went with it. eval needs a sandbox for this conversation (host kernels are turned off): create one, then call eval again to start a new kernel there.", sandboxOf(prev))
}

// goneBehind is movedNote for a sandbox found gone on the way to it.
func goneBehind(prev string, cause error, host bool) string {
	next := "Calling eval again starts a new kernel on the host, which has none of the sandbox's files; to run in a sandbox instead, create one for this conversation first."
	if !host {
		next = "eval needs a sandbox for this conversation (host kernels are turned off): create one, then call eval again to start a new kernel there."
	}
	return fmt.Sprintf("The sandbox %s that this conversation's kernels ran in is gone (%v), and the kernels' state (variables, imports, loaded data) went with it. This cell was not run. %s", sandboxOf(prev), cause, next)
}

// deletedUnder is what a cell reports whose sandbox was deleted while it
// ran: the kernel went with the sandbox, so there is nothing to reconnect
// to.
func deletedUnder(id string, host bool) string {
	next := "Calling eval again starts a new kernel on the host, which has none of the sandbox's files; to run in a sandbox instead, create one for this conversation first."
	if !host {
		next = "To run code again, create a sandbox for this conversation, then call eval to start a new kernel there."
	}
	return fmt.Sprintf("The sandbox %s was deleted while this cell ran, and its kernel with it: the cell's output and the kernel's state (variables, imports, loaded data) are lost. %s", id, next)
}
