package jail

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// jailsDir is the folder of jail cgroups under the agent's own cgroup.
const jailsDir = "sandboxd-jails"

// cgroup is the jail's cgroup in each hierarchy that holds a limit. The
// outer process joins it before starting init, so everything in the jail
// is counted in it.
type cgroup struct {
	dirs    []string // the jail's cgroup directories
	parents []string // the cgroup each came from, to leave it before removal
	memDir  string   // where the memory limit is ("" with none)
	v2      bool
	// none is set when no cgroup holds the memory limit; init falls back
	// to RLIMIT_AS.
	none bool
}

// newCgroup makes a cgroup for this jail with s's limits and moves this
// process into it. Where no cgroup can be made (none mounted, read-only,
// cgroup v2 with no delegation) it returns one with none set: rlimits are
// then what caps the jail.
func newCgroup(s *Spec) (*cgroup, error) {
	cg := &cgroup{}
	name := "k" + strconv.Itoa(os.Getpid())
	mounts, own := cgroupMounts()
	limits := map[string][][2]string{
		"memory": nil, "pids": nil, "cpu": nil,
	}
	if s.MemoryBytes > 0 {
		limits["memory"] = [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(s.MemoryBytes, 10)}, {"memory.memsw.limit_in_bytes?", strconv.FormatInt(s.MemoryBytes, 10)}}
	}
	if s.Pids > 0 {
		limits["pids"] = [][2]string{{"pids.max", strconv.Itoa(s.Pids)}}
	}
	if s.CPUs > 0 {
		limits["cpu"] = [][2]string{{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", strconv.Itoa(int(s.CPUs * 100000))}}
	}
	v1 := false
	for ctl, files := range limits {
		mnt, ok := mounts[ctl]
		if !ok {
			continue
		}
		v1 = true
		if files == nil {
			continue
		}
		parent := filepath.Join(mnt.dir, strings.TrimPrefix(own[mnt.key], mnt.root))
		dir, err := cg.join(parent, name, files)
		if err != nil {
			// A hierarchy we may not write (read-only in a container):
			// rlimits are the fallback.
			cg.remove()
			return &cgroup{none: s.MemoryBytes > 0}, nil
		}
		if ctl == "memory" {
			cg.memDir = dir
		}
	}
	if !v1 {
		if mnt, ok := mounts[""]; ok {
			cg.v2 = true
			if err := cg.joinV2(filepath.Join(mnt.dir, strings.TrimPrefix(own[""], mnt.root)), name, s); err != nil {
				cg.remove()
				cg = &cgroup{}
			}
		}
	}
	cg.none = cg.memDir == "" && s.MemoryBytes > 0
	return cg, nil
}

// join makes parent/sandboxd-jails/name with the limit files and moves
// this process in. A file named with a trailing ? may be missing.
func (cg *cgroup) join(parent, name string, files [][2]string) (string, error) {
	base := filepath.Join(parent, jailsDir)
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cannot make the jail cgroup folder %s: %v", base, err)
	}
	sweep(base)
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cannot make the jail's cgroup %s: %v", dir, err)
	}
	cg.dirs, cg.parents = append(cg.dirs, dir), append(cg.parents, parent)
	for _, f := range files {
		file, optional := strings.CutSuffix(f[0], "?")
		if err := os.WriteFile(filepath.Join(dir, file), []byte(f[1]), 0o644); err != nil && !(optional && errors.Is(err, os.ErrNotExist)) {
			return "", fmt.Errorf("cannot set the jail's limit %s to %s: %v", file, f[1], err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return "", fmt.Errorf("cannot join the jail's cgroup %s: %v", dir, err)
	}
	return dir, nil
}

// joinV2 does the same on a unified hierarchy, where it works only when
// the agent's cgroup may enable controllers for its children.
func (cg *cgroup) joinV2(parent, name string, s *Spec) error {
	base := filepath.Join(parent, jailsDir)
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	sweep(base)
	for _, d := range []string{parent, base} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0o644); err != nil {
			return err
		}
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	cg.dirs, cg.parents = append(cg.dirs, dir), append(cg.parents, parent)
	files := [][2]string{}
	if s.MemoryBytes > 0 {
		files = append(files, [2]string{"memory.max", strconv.FormatInt(s.MemoryBytes, 10)}, [2]string{"memory.swap.max", "0"})
	}
	if s.Pids > 0 {
		files = append(files, [2]string{"pids.max", strconv.Itoa(s.Pids)})
	}
	if s.CPUs > 0 {
		files = append(files, [2]string{"cpu.max", strconv.Itoa(int(s.CPUs*100000)) + " 100000"})
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if s.MemoryBytes > 0 {
		cg.memDir = dir
	}
	return nil
}

// sweep removes the cgroups of jails that ended without removing theirs
// (their outer process was killed); a cgroup still in use refuses.
func sweep(base string) {
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "k") {
			_ = syscall.Rmdir(filepath.Join(base, e.Name()))
		}
	}
}

// oomKilled reports whether the memory limit killed a process of the jail.
func (cg *cgroup) oomKilled() bool {
	if cg.memDir == "" {
		return false
	}
	file := "memory.oom_control"
	if cg.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(cg.memDir, file))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(n))
			return v > 0
		}
	}
	return false
}

// remove leaves the jail's cgroups, kills what is left in them and removes
// them. It may be called again.
func (cg *cgroup) remove() {
	for i, dir := range cg.dirs {
		_ = os.WriteFile(filepath.Join(cg.parents[i], "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		deadline := time.Now().Add(2 * time.Second)
		for {
			for _, pid := range cgroupPids(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if err := syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cg.dirs, cg.parents = nil, nil
}

func cgroupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n != os.Getpid() {
			out = append(out, n)
		}
	}
	return out
}

// cgMount is where one hierarchy is mounted: dir shows the cgroup root.
type cgMount struct {
	dir, root string
	key       string // the controller list as /proc/self/cgroup names it
}

// cgroupMounts finds the v1 hierarchy of each controller (and the unified
// one, under ""), and this process's cgroup in each (by controller list).
func cgroupMounts() (map[string]cgMount, map[string]string) {
	own := map[string]string{}
	if f, err := os.Open("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) == 3 {
				own[parts[1]] = parts[2]
			}
		}
		f.Close()
	}
	mounts := map[string]cgMount{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mounts, own
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		root, dir := a[3], a[4]
		switch b[0] {
		case "cgroup2":
			if _, seen := mounts[""]; !seen {
				mounts[""] = cgMount{dir: dir, root: root}
			}
		case "cgroup":
			var ctls []string
			for _, o := range strings.Split(b[2], ",") {
				if o == "memory" || o == "pids" || o == "cpu" || o == "cpuacct" || o == "cpuset" || o == "blkio" || o == "devices" || o == "freezer" || o == "net_cls" || o == "net_prio" || o == "perf_event" || o == "hugetlb" || o == "rdma" || o == "misc" {
					ctls = append(ctls, o)
				}
			}
			key := strings.Join(ctls, ",")
			for _, c := range ctls {
				if _, seen := mounts[c]; !seen {
					mounts[c] = cgMount{dir: dir, root: root, key: key}
				}
			}
		}
	}
	return mounts, own
}
