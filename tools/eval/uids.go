package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/sandboxd/sandboxd/errdefs"
)

// maxUIDFile caps the uid table read back from disk.
const maxUIDFile = 64 << 20

// uidTable gives each conversation's host kernels a uid of their own from
// [first, first+count), kept in a file so a restarted sandboxd gives the
// same conversation the same uid (its scratch files stay its own). A uid
// is tried first where the owner's hash points, then the next free one.
type uidTable struct {
	file         string
	first, count int

	// mu guards byOwner, used and loaded.
	mu      sync.Mutex
	byOwner map[string]int
	used    map[int]bool
	loaded  bool
}

func newUIDTable(file string, first, count int) *uidTable {
	return &uidTable{file: file, first: first, count: count, byOwner: map[string]int{}, used: map[int]bool{}}
}

// get returns owner's uid, giving it one when it has none.
func (u *uidTable) get(owner string) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.loaded {
		if err := u.loadLocked(); err != nil {
			return 0, err
		}
		u.loaded = true
	}
	if uid, ok := u.byOwner[owner]; ok {
		return uid, nil
	}
	if len(u.used) >= u.count {
		return 0, errdefs.ResourceExhausted("all %d host kernel uids (%d to %d) are taken by conversations; widen eval.jail.uid_count", u.count, u.first, u.first+u.count-1)
	}
	h := fnv.New64a()
	io.WriteString(h, owner)
	start := int(h.Sum64() % uint64(u.count))
	for i := range u.count {
		uid := u.first + (start+i)%u.count
		if u.used[uid] {
			continue
		}
		u.byOwner[owner], u.used[uid] = uid, true
		if err := u.saveLocked(); err != nil {
			delete(u.byOwner, owner)
			delete(u.used, uid)
			return 0, err
		}
		return uid, nil
	}
	return 0, errdefs.ResourceExhausted("no host kernel uid is free in %d to %d; widen eval.jail.uid_count", u.first, u.first+u.count-1)
}

// release gives owner's uid back (its kernels and scratch are gone).
func (u *uidTable) release(owner string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.loaded {
		if err := u.loadLocked(); err != nil {
			return err
		}
		u.loaded = true
	}
	uid, ok := u.byOwner[owner]
	if !ok {
		return nil
	}
	delete(u.byOwner, owner)
	delete(u.used, uid)
	return u.saveLocked()
}

func (u *uidTable) loadLocked() error {
	f, err := os.Open(u.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read the host kernel uids in %s: %w", u.file, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxUIDFile+1))
	if err != nil {
		return fmt.Errorf("cannot read the host kernel uids in %s: %w", u.file, err)
	}
	if len(b) > maxUIDFile {
		return fmt.Errorf("the host kernel uid file %s is over %d bytes; remove it (conversations get new uids)", u.file, maxUIDFile)
	}
	var m map[string]int
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("the host kernel uid file %s is not valid (%v); remove it (conversations get new uids)", u.file, err)
	}
	for owner, uid := range m {
		// A uid outside the range (the range was changed) is given anew.
		if uid >= u.first && uid < u.first+u.count && !u.used[uid] {
			u.byOwner[owner], u.used[uid] = uid, true
		}
	}
	return nil
}

func (u *uidTable) saveLocked() error {
	b, err := json.Marshal(u.byOwner)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(u.file), ".uids-*")
	if err != nil {
		return fmt.Errorf("cannot save the host kernel uids: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), u.file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cannot save the host kernel uids in %s: %w", u.file, err)
	}
	return nil
}
