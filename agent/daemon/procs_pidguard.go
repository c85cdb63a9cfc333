package daemon

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pidsCgroup is the pids controller of the cgroup the agent runs in: the
// sandbox's, in a container. Reading it needs no privilege; the sandbox
// cannot make cgroups of its own (/sys/fs/cgroup is read-only), so the
// agent keeps its reserve by watching this counter and killing call trees.
type pidsCgroup struct {
	dir string // holds pids.current and pids.max
}

// findPidsCgroup finds the agent's pids cgroup, cgroup v1 or v2, seen from
// inside a container (the cgroup mounted at the root of /sys/fs/cgroup) or
// outside one (the path /proc/self/cgroup names). It returns nil when there
// is none or it has no limit: then there is nothing to keep a reserve of.
func findPidsCgroup() *pidsCgroup {
	var dirs []string
	if f, err := os.Open("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// hierarchy-ID:controller-list:path
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[1] == "":
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[2]))
			case hasController(parts[1], "pids"):
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[1], parts[2]))
			}
		}
		f.Close()
	}
	dirs = append(dirs, "/sys/fs/cgroup/pids", "/sys/fs/cgroup")
	for _, d := range dirs {
		c := &pidsCgroup{dir: d}
		if _, limit, err := c.read(); err == nil && limit > 0 {
			return c
		}
	}
	return nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// read returns pids.current and pids.max (0 when the limit is "max").
func (c *pidsCgroup) read() (current, limit int64, err error) {
	cur, err := readInt(filepath.Join(c.dir, "pids.current"))
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(filepath.Join(c.dir, "pids.max"))
	if err != nil {
		return 0, 0, err
	}
	if s := string(bytes.TrimSpace(b)); s != "max" {
		if limit, err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, err
		}
	}
	return cur, limit, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
}

// pidReserve is how many of the sandbox's pids the agent keeps free: a
// sixteenth of the limit, at least 4 and at most 64. Enough for the agent to
// start a call (its supervisor and a shell) and recover, small enough not to
// refuse work a small sandbox could have done.
func pidReserve(limit int64) int64 {
	return min(max(limit/16, 4), 64)
}

// pidsUsage is a reading of the sandbox's pids counter.
type pidsUsage struct {
	inUse, limit, reserve int64
	refused               int64 // forks refused at the limit so far (pids.events "max"), -1 if unknown
}

func (u pidsUsage) low() bool { return u.limit > 0 && u.limit-u.inUse < u.reserve }

// refusedCount reads the "max" line of pids.events: how many forks the
// limit has refused.
func (c *pidsCgroup) refusedCount() int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, "pids.events"))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "max "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// pidGuard keeps the sandbox's pid reserve: while calls run it reads the
// pids counter every guardTick, and when fewer than the reserve are free it
// has the supervisor of the call with the most processes kill its tree.
// Polling cannot stop a fork bomb from reaching the limit; it ends the bomb
// a tick later, and the thread reserves of the agent and of the supervisors
// keep them running meanwhile.
type pidGuard struct {
	cg *pidsCgroup

	// mu guards victims, lastPID/lastAt and refused.
	mu      sync.Mutex
	victims map[int]pidsUsage // supervisor pid -> the reading it was killed at
	lastPID int
	lastAt  time.Time
	refused int64 // the refused-fork count last seen, -1 when no call runs
}

const (
	guardTick = 50 * time.Millisecond
	// victimGrace is how long a signalled supervisor has to end its tree
	// before the guard picks again (maybe the same one).
	victimGrace = time.Second
)

func newPidGuard() *pidGuard {
	cg := findPidsCgroup()
	if cg == nil {
		return nil
	}
	return &pidGuard{cg: cg, victims: map[int]pidsUsage{}, refused: -1}
}

func (g *pidGuard) usage() (pidsUsage, error) {
	cur, lim, err := g.cg.read()
	if err != nil {
		return pidsUsage{}, err
	}
	return pidsUsage{inUse: cur, limit: lim, reserve: pidReserve(lim), refused: g.cg.refusedCount()}, nil
}

// reclaim signals the supervisor among sups with the most processes below
// it (at least least) to kill them, unless the last one signalled is still
// at it. It returns false when no supervisor has enough to kill.
func (g *pidGuard) reclaim(u pidsUsage, sups []int, least int) bool {
	if len(sups) == 0 {
		return false
	}
	snap := procSnapshot()
	victim, most := 0, 0
	for _, pid := range sups {
		if live, _ := descendants(snap, pid); len(live) > most {
			victim, most = pid, len(live)
		}
	}
	if victim == 0 || most < least {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if victim == g.lastPID && time.Since(g.lastAt) < victimGrace {
		return true
	}
	if syscall.Kill(victim, syscall.SIGUSR1) != nil {
		return false
	}
	g.lastPID, g.lastAt = victim, time.Now()
	g.victims[victim] = u
	return true
}

// picked tells whether the supervisor was signalled to kill its tree.
func (g *pidGuard) picked(sup int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.victims[sup]
	return ok
}

// killedAt pops the reading a supervisor was signalled at.
func (g *pidGuard) killedAt(sup int) (pidsUsage, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u, ok := g.victims[sup]
	delete(g.victims, sup)
	return u, ok
}

// watch runs until done is closed, reclaiming whenever the reserve is
// short or the limit has refused a fork since the last look (or since the
// first call began): a fork bomb hovers at the limit, its processes
// retrying their forks, so a tick may well see the reserve free while the
// bomb is still growing.
func (g *pidGuard) watch(done <-chan struct{}, sups func() []int) {
	tick := time.NewTicker(guardTick)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		s := sups()
		if len(s) == 0 {
			g.mu.Lock()
			g.refused = -1
			g.mu.Unlock()
			continue
		}
		u, err := g.usage()
		if err != nil {
			continue
		}
		switch {
		case u.low():
			g.reclaim(u, s, 1)
		case g.refusedSince(u):
			// The limit was hit but the tick came after: only a call
			// holding a good share of the processes is taken for the cause.
			g.reclaim(u, s, int(max(u.limit/4, 1)))
		}
	}
}

// refusedSince tells whether the limit refused forks since the last look,
// and makes u the last look.
func (g *pidGuard) refusedSince(u pidsUsage) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	hit := g.refused >= 0 && u.refused > g.refused
	g.refused = u.refused
	return hit
}

// begin is called before a call starts: forks refused before it are not
// taken for its doing.
func (g *pidGuard) begin(u pidsUsage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused = u.refused
}

// makeRoom reclaims until the reserve is free again or d has passed, and
// returns the last reading.
func (g *pidGuard) makeRoom(d time.Duration, sups func() []int) (pidsUsage, error) {
	deadline := time.Now().Add(d)
	for {
		u, err := g.usage()
		if err != nil {
			return u, err
		}
		if !u.low() {
			g.begin(u)
			return u, nil
		}
		if !g.reclaim(u, sups(), 1) || time.Now().After(deadline) {
			return u, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
