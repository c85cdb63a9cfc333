package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// maxBurst bounds how long an overflowing burst is held back: a long `git
// checkout` is one "many files changed" event, sent at most this long
// after it began.
const maxBurst = 2 * time.Second

// watchHub keeps one rootWatch per resolved workspace root, shared by
// every watch stream on it.
type watchHub struct {
	log *slog.Logger

	mu     sync.Mutex // guards roots and closed; held while a new root's tree is watched
	roots  map[string]*rootWatch
	closed bool
}

func newWatchHub(log *slog.Logger) *watchHub {
	return &watchHub{log: log, roots: map[string]*rootWatch{}}
}

// subscribe adds a subscriber to root's watch, starting the watch when it
// is the first. The watch's limits are the first subscriber's.
func (h *watchHub) subscribe(r *proto.WatchRequest) (*rootWatch, *watchSub, error) {
	real, err := resolveRoot(r.Root)
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, errdefs.Unavailable("the agent daemon is shutting down; reconnect and retry")
	}
	w := h.roots[real]
	if w == nil {
		w, err = startRootWatch(h, real, r)
		if err != nil {
			return nil, nil, err
		}
		h.roots[real] = w
	}
	sub := newWatchSub(w)
	w.mu.Lock()
	w.subs[sub] = struct{}{}
	w.mu.Unlock()
	return w, sub, nil
}

// leave removes sub; the last one to leave ends the watch.
func (h *watchHub) leave(w *rootWatch, sub *watchSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.mu.Lock()
	delete(w.subs, sub)
	last := len(w.subs) == 0
	w.mu.Unlock()
	if last && h.roots[w.root] == w {
		delete(h.roots, w.root)
		w.close()
	}
}

// closeAll ends every watch (the daemon's Close); their streams end.
func (h *watchHub) closeAll() {
	h.mu.Lock()
	h.closed = true
	roots := h.roots
	h.roots = map[string]*rootWatch{}
	h.mu.Unlock()
	for _, w := range roots {
		w.close()
	}
}

// rootWatch is the inotify watch of one workspace: every directory in it
// but .git, symlinked and gitignored ones, up to maxDirs.
//
// Goroutines: loop, which reads the watcher's events and errors, and the
// flush timer's callback. close stops the timer, closes the fsnotify
// watcher (which ends loop) and every subscriber.
type rootWatch struct {
	hub      *watchHub
	root     string
	ws       *os.Root // the workspace, for its .gitignore files
	maxDirs  int
	maxBatch int
	window   time.Duration
	fs       *fsnotify.Watcher
	// barrierDir is a private directory outside the workspace on the same
	// inotify instance: a file made there for a flush comes back as an
	// event after every change made before it (one queue, in order).
	barrierDir string
	loopDone   chan struct{}

	mu            sync.Mutex // guards everything below
	dirs          map[string]*watchedDir
	limited       bool
	subs          map[*watchSub]struct{}
	pending       map[string]pendingChange
	overflow      bool
	overflowStart time.Time
	burstPaths    int       // paths the current burst touched, across its windows
	lastChange    time.Time // when the last change was noted
	flushAt       time.Time
	timer         *time.Timer
	barriers      map[string]barrierReq
	nextBarrier   uint64
	closed        bool
}

// watchedDir is a watched directory's .gitignore rules: inherited from
// above, and those in force for its entries (with its own file).
type watchedDir struct {
	inherited ignoreStack
	stack     ignoreStack
}

type pendingChange struct {
	kind proto.ChangeKind
	dir  bool
}

type barrierReq struct {
	sub *watchSub
	id  uint64
}

func startRootWatch(h *watchHub, root string, r *proto.WatchRequest) (*rootWatch, error) {
	w := &rootWatch{
		hub: h, root: root, maxDirs: r.MaxDirs, maxBatch: r.MaxBatch, window: r.Window,
		dirs: map[string]*watchedDir{}, subs: map[*watchSub]struct{}{}, pending: map[string]pendingChange{},
		barriers: map[string]barrierReq{}, loopDone: make(chan struct{}),
	}
	if w.maxDirs <= 0 {
		w.maxDirs = proto.DefaultWatchMaxDirs
	}
	if w.maxBatch <= 0 {
		w.maxBatch = proto.DefaultWatchMaxBatch
	}
	if w.window <= 0 {
		w.window = proto.DefaultWatchWindow
	}
	ws, err := os.OpenRoot(root)
	if err != nil {
		return nil, fsError(err, root)
	}
	w.ws = ws
	fw, err := fsnotify.NewBufferedWatcher(1024)
	if err != nil {
		ws.Close()
		return nil, errdefs.Unavailable("the agent cannot watch %s: %v (the kernel's inotify instances may be used up: fs.inotify.max_user_instances)", root, err)
	}
	w.fs = fw
	if d, err := os.MkdirTemp("", "sandbox-agent-watch-"); err == nil {
		if fw.Add(d) == nil {
			w.barrierDir = d
		} else {
			os.Remove(d)
		}
	}
	w.mu.Lock()
	w.addTree(root, nil, false)
	w.mu.Unlock()
	go w.loop()
	return w, nil
}

func (w *rootWatch) rel(abs string) string {
	if abs == w.root {
		return ""
	}
	return strings.TrimPrefix(abs, w.root+"/")
}

// addTree watches dir and the directories below it, breadth first, with
// inherited the rules in force above dir. With collect it returns the
// files found, which were made before their directory's watch existed
// (mkdir -p a/b && touch a/b/c, a checkout creating directories).
// Called with mu held.
func (w *rootWatch) addTree(dir string, inherited ignoreStack, collect bool) []string {
	type item struct {
		abs       string
		inherited ignoreStack
	}
	var found []string
	queue := []item{{dir, inherited}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		if _, ok := w.dirs[it.abs]; ok {
			continue
		}
		if len(w.dirs) >= w.maxDirs {
			w.limited = true
			return found
		}
		if err := w.fs.Add(it.abs); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				w.limited = true // the kernel's fs.inotify.max_user_watches
				return found
			}
			continue // gone already, or unreadable
		}
		rel := w.rel(it.abs)
		wd := &watchedDir{inherited: it.inherited, stack: loadIgnore(it.inherited, w.ws, dotIfEmpty(rel), rel)}
		w.dirs[it.abs] = wd
		ents, _ := os.ReadDir(it.abs)
		for _, e := range ents {
			name := e.Name()
			crel := join(rel, name)
			if e.IsDir() {
				if name == ".git" || wd.stack.ignored(crel, true) {
					continue
				}
				queue = append(queue, item{filepath.Join(it.abs, name), wd.stack})
				continue
			}
			if collect && e.Type().IsRegular() && !commitTemp(name) && !wd.stack.ignored(crel, false) {
				found = append(found, filepath.Join(it.abs, name))
			}
		}
	}
	return found
}

func dotIfEmpty(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// dropTree forgets dir and every watched directory below it (removed or
// moved away; a moved one comes back as a create at its new name).
// Called with mu held.
func (w *rootWatch) dropTree(dir string) {
	prefix := dir + "/"
	for d := range w.dirs {
		if d == dir || strings.HasPrefix(d, prefix) {
			delete(w.dirs, d)
			_ = w.fs.Remove(d) // already gone when the directory was deleted
		}
	}
}

// loop turns inotify events into pending changes until the watcher closes.
func (w *rootWatch) loop() {
	defer close(w.loopDone)
	for {
		select {
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.mu.Lock()
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// The kernel's queue overflowed: changes were lost.
				w.startOverflow(time.Now())
				w.arm()
			} else {
				w.hub.log.Warn("workspace watch error", "root", w.root, "err", err)
			}
			w.mu.Unlock()
		}
	}
}

func (w *rootWatch) handle(ev fsnotify.Event) {
	name := ev.Name
	dir, base := filepath.Dir(name), filepath.Base(name)
	if w.barrierDir != "" && (dir == w.barrierDir || name == w.barrierDir) {
		if ev.Has(fsnotify.Create) {
			w.barrierSeen(base)
		}
		return
	}
	if commitTemp(base) {
		return // a write_files stage or backup: its rename is the change
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	parent, ok := w.dirs[dir]
	if !ok {
		// An event of the root itself (deleted, moved) or of a directory
		// no longer watched.
		if _, isDir := w.dirs[name]; isDir && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
			w.dropTree(name)
			w.note(name, proto.Deleted, true)
		}
		return
	}
	rel := w.rel(name)
	switch {
	case ev.Has(fsnotify.Create):
		fi, err := os.Lstat(name)
		if err == nil && fi.IsDir() {
			if base == ".git" || parent.stack.ignored(rel, true) {
				return
			}
			w.note(name, proto.Created, true)
			for _, f := range w.addTree(name, parent.stack, true) {
				w.note(f, proto.Created, false)
			}
			return
		}
		if parent.stack.ignored(rel, false) {
			return
		}
		if base == ".gitignore" {
			w.reloadIgnore(dir, parent)
		}
		w.note(name, proto.Created, false)
	case ev.Has(fsnotify.Write):
		if parent.stack.ignored(rel, false) {
			return
		}
		if base == ".gitignore" {
			w.reloadIgnore(dir, parent)
		}
		w.note(name, proto.Changed, false)
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		if _, isDir := w.dirs[name]; isDir {
			w.dropTree(name)
			w.note(name, proto.Deleted, true)
			return
		}
		if parent.stack.ignored(rel, false) {
			return
		}
		w.note(name, proto.Deleted, false)
	}
}

// reloadIgnore re-reads a directory's .gitignore for the events that
// follow; directories below keep the rules they were watched with.
func (w *rootWatch) reloadIgnore(dir string, wd *watchedDir) {
	rel := w.rel(dir)
	wd.stack = loadIgnore(wd.inherited, w.ws, dotIfEmpty(rel), rel)
}

// note records a change, merged with what is pending for the path: the
// subscriber needs the net effect (created then changed is created,
// deleted then created is changed). A burst is a run of changes with no
// quiet window between them; once it has touched more than maxBatch
// paths, across its windows, the rest of it is one overflow event.
// Called with mu held.
func (w *rootWatch) note(p string, k proto.ChangeKind, dir bool) {
	now := time.Now()
	if now.Sub(w.lastChange) > w.window {
		w.burstPaths = 0 // a quiet window ended the last burst
	}
	w.lastChange = now
	if w.overflow {
		w.arm()
		return
	}
	prev, seen := w.pending[p]
	if seen {
		switch {
		case k == proto.Created && prev.kind == proto.Deleted:
			k = proto.Changed
		case k == proto.Created && prev.kind == proto.Changed:
			k = proto.Changed
		case k == proto.Changed && prev.kind == proto.Created:
			k = proto.Created
		}
	} else {
		w.burstPaths++
	}
	w.pending[p] = pendingChange{kind: k, dir: dir}
	if w.burstPaths > w.maxBatch {
		w.startOverflow(now)
	}
	w.arm()
}

// startOverflow turns what is pending into one overflow. Called with mu held.
func (w *rootWatch) startOverflow(now time.Time) {
	w.overflow = true
	w.overflowStart = now
	clear(w.pending)
}

// arm schedules the flush: a window after the first pending change, or,
// while overflowing, a window after the last change but at most maxBurst
// after the overflow began. Called with mu held.
func (w *rootWatch) arm() {
	now := time.Now()
	at := now.Add(w.window)
	if w.timer == nil {
		w.flushAt = at
		w.timer = time.AfterFunc(w.window, w.onTimer)
		return
	}
	if w.overflow {
		if limit := w.overflowStart.Add(maxBurst); at.After(limit) {
			at = limit
		}
		w.flushAt = at
	}
}

func (w *rootWatch) onTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil || w.closed {
		return
	}
	if d := time.Until(w.flushAt); d > 0 {
		w.timer.Reset(d)
		return
	}
	w.flushLocked()
}

// flushLocked sends what is pending to every subscriber. Called with mu held.
func (w *rootWatch) flushLocked() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if len(w.pending) == 0 && !w.overflow {
		return
	}
	ev := proto.WatchEvent{Overflow: w.overflow, Dirs: len(w.dirs), Limited: w.limited}
	if !w.overflow {
		paths := make([]string, 0, len(w.pending))
		for p := range w.pending {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		ev.Changes = make([]proto.WatchChange, len(paths))
		for i, p := range paths {
			pc := w.pending[p]
			ev.Changes[i] = proto.WatchChange{Path: p, Kind: pc.kind, IsDir: pc.dir}
		}
	}
	clear(w.pending)
	w.overflow = false
	for sub := range w.subs {
		sub.send(ev)
	}
}

// requestFlush responds to sub's flush id once every change made before it
// has been sent: a file made in the barrier directory comes back through
// the same inotify queue after them.
func (w *rootWatch) requestFlush(sub *watchSub, id uint64) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.nextBarrier++
	name := fmt.Sprintf("flush-%d", w.nextBarrier)
	w.barriers[name] = barrierReq{sub: sub, id: id}
	bdir := w.barrierDir
	w.mu.Unlock()
	if bdir == "" || os.WriteFile(filepath.Join(bdir, name), nil, 0o600) != nil {
		// No barrier directory: the changes the kernel queued are read
		// within moments; respond after a short pause instead.
		time.AfterFunc(20*time.Millisecond, func() { w.barrierSeen(name) })
	}
}

func (w *rootWatch) barrierSeen(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, ok := w.barriers[name]
	if !ok || w.closed {
		return
	}
	delete(w.barriers, name)
	if w.barrierDir != "" {
		os.Remove(filepath.Join(w.barrierDir, name))
	}
	w.flushLocked()
	b.sub.send(proto.WatchEvent{Flushed: b.id, Dirs: len(w.dirs), Limited: w.limited})
}

// state is what the watch covers, for the response.
func (w *rootWatch) state() *proto.WatchResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	return &proto.WatchResponse{Base: w.root, Dirs: len(w.dirs), Limited: w.limited}
}

// close ends the watch: the timer, the fsnotify watcher (and so loop),
// the barrier directory and every subscriber.
func (w *rootWatch) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	subs := w.subs
	w.subs = map[*watchSub]struct{}{}
	w.mu.Unlock()
	w.fs.Close()
	<-w.loopDone
	if w.barrierDir != "" {
		os.RemoveAll(w.barrierDir)
	}
	w.ws.Close()
	for sub := range subs {
		sub.end()
	}
}
