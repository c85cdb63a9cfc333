package envd

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// filesystem.Filesystem. Stat, ListDir, MakeDir, Move and Remove run as one
// short command in the sandbox (GNU find, mkdir, mv, rm), which sees owners,
// groups and link targets as the sandbox does; the watches are the agent's
// inotify watch.

type (
	pathRequest struct {
		Path string `json:"path"`
	}
	listDirRequest struct {
		Path  string `json:"path"`
		Depth uint32 `json:"depth"`
	}
	moveRequest struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	entryInfo struct {
		Name          string  `json:"name"`
		Type          string  `json:"type"`
		Path          string  `json:"path"`
		Size          int64   `json:"size,string"`
		Mode          uint32  `json:"mode"`
		Permissions   string  `json:"permissions"`
		Owner         string  `json:"owner"`
		Group         string  `json:"group"`
		ModifiedTime  string  `json:"modifiedTime,omitempty"`
		SymlinkTarget *string `json:"symlinkTarget,omitempty"`
		// Metadata is the file's metadata (metadata.go).
		Metadata map[string]string `json:"metadata,omitempty"`
	}
	entryResponse struct {
		Entry *entryInfo `json:"entry"`
	}
	listDirResponse struct {
		Entries []entryInfo `json:"entries"`
	}
	watchRequest struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
		// IncludeEntry adds each event's entry (envd 0.6.3).
		IncludeEntry bool `json:"includeEntry"`
		// AllowNetworkMounts lets a watch of a network mount start (envd
		// 0.6.4); the agent's watch needs no such leave, so it changes
		// nothing here.
		AllowNetworkMounts bool `json:"allowNetworkMounts"`
	}
	fsEvent struct {
		Name  string     `json:"name"`
		Type  string     `json:"type"`
		Entry *entryInfo `json:"entry,omitempty"`
	}
	watchDirResponse struct {
		Start      *struct{} `json:"start,omitempty"`
		Filesystem *fsEvent  `json:"filesystem,omitempty"`
		Keepalive  *struct{} `json:"keepalive,omitempty"`
	}
)

// maxListing caps what one ListDir may print (about 100 000 entries).
const maxListing = 16 << 20

// findFormat prints one entry as NUL-separated fields: type, size, octal
// permissions, owner, group, modification time, link target, path.
const findFormat = `%y\0%s\0%m\0%u\0%g\0%T@\0%l\0%p\0`

// Exit codes of the scripts below that mean an answer, not a failure.
const (
	exitMissing = 3
	exitNotDir  = 4
	exitExists  = 5
)

const (
	statScript = `p=$1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 3; fi
exec find "$p" -maxdepth 0 -printf "$2"`
	listScript = `p=$1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 3; fi
if [ ! -d "$p" ]; then exit 4; fi
exec find -H "$p" -mindepth 1 -maxdepth "$3" -printf "$2"`
	mkdirScript = `if [ -e "$1" ] || [ -L "$1" ]; then exit 5; fi
mkdir -p -- "$1"`
	moveScript = `if [ ! -e "$1" ] && [ ! -L "$1" ]; then exit 3; fi
mkdir -p -- "$(dirname -- "$2")" && mv -fT -- "$1" "$2"`
	removeScript = `rm -rf -- "$1"`
)

// run runs script with args in the sandbox; an exit code in answers is
// returned as such, any other failure as an error naming the output.
func run(ctx context.Context, t target, script string, args ...string) ([]byte, int, error) {
	res, err := t.c.Exec(ctx, &proto.ExecRequest{Argv: append([]string{"sh", "-c", script, "sh"}, args...), MaxBytes: maxListing, Timeout: time.Minute, User: t.acct.agentUser()})
	if err != nil {
		return nil, 0, err
	}
	if res.StdoutOmitted > 0 {
		return nil, 0, rpcErr(codeResourceExhausted, "the listing is over %d MiB; list a smaller directory or a smaller depth", maxListing>>20)
	}
	switch res.ExitCode {
	case 0, exitMissing, exitNotDir, exitExists:
		return res.Stdout, res.ExitCode, nil
	}
	msg := strings.TrimSpace(string(res.Stderr))
	if msg == "" {
		msg = "exit status " + strconv.Itoa(res.ExitCode)
	}
	return nil, res.ExitCode, rpcErr(codeInvalidArgument, "%s", msg)
}

// parseEntries reads find's output in findFormat.
func parseEntries(out []byte) []entryInfo {
	fields := bytes.Split(out, []byte{0})
	var es []entryInfo
	for i := 0; i+8 <= len(fields); i += 8 {
		f := func(k int) string { return string(fields[i+k]) }
		p := f(7)
		e := entryInfo{Name: path.Base(p), Path: p, Owner: f(3), Group: f(4)}
		e.Size, _ = strconv.ParseInt(f(1), 10, 64)
		perm, _ := strconv.ParseUint(f(2), 8, 32)
		mode := fs.FileMode(perm) & fs.ModePerm
		switch f(0) {
		case "d":
			e.Type, mode = "FILE_TYPE_DIRECTORY", mode|fs.ModeDir
		case "l":
			e.Type, mode = "FILE_TYPE_SYMLINK", mode|fs.ModeSymlink
			target := linkTarget(p, f(6))
			e.SymlinkTarget = &target
		case "f":
			e.Type = "FILE_TYPE_FILE"
		default:
			e.Type = "FILE_TYPE_UNSPECIFIED"
		}
		e.Mode, e.Permissions = uint32(perm), mode.String()
		if secs, err := strconv.ParseFloat(f(5), 64); err == nil {
			whole, frac := math.Modf(secs)
			e.ModifiedTime = time.Unix(int64(whole), int64(frac*1e9)).UTC().Format(time.RFC3339Nano)
		}
		es = append(es, e)
	}
	return es
}

// linkTarget is the absolute path the link at p points to: E2B reports
// the target as a path in the sandbox, so a relative one is read from the
// link's directory.
func linkTarget(p, target string) string {
	if path.IsAbs(target) {
		return path.Clean(target)
	}
	return path.Join(path.Dir(p), target)
}

// stat is the entry at abs.
func stat(ctx context.Context, t target, abs string) (*entryInfo, error) {
	out, code, err := run(ctx, t, statScript, abs, findFormat)
	if err != nil {
		return nil, err
	}
	if code == exitMissing {
		return nil, rpcErr(codeNotFound, "path %s does not exist", abs)
	}
	es := parseEntries(out)
	if len(es) != 1 {
		return nil, rpcErr(codeInternal, "the entry of %s could not be read", abs)
	}
	withMetadata(ctx, t, es)
	return &es[0], nil
}

func (s *Service) serveFilesystem(w http.ResponseWriter, r *http.Request, t target, method string) {
	ctx := r.Context()
	switch method {
	case "Stat":
		var req pathRequest
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		e, err := stat(ctx, t, t.acct.abs(req.Path))
		if err != nil {
			writeUnaryError(w, err)
			return
		}
		writeUnary(w, entryResponse{Entry: e})
	case "ListDir":
		var req listDirRequest
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		depth := max(req.Depth, 1)
		abs := t.acct.abs(req.Path)
		out, code, err := run(ctx, t, listScript, abs, findFormat, strconv.FormatUint(uint64(depth), 10))
		switch {
		case err != nil:
			writeUnaryError(w, err)
		case code == exitMissing:
			writeUnaryError(w, rpcErr(codeNotFound, "directory %s does not exist", abs))
		case code == exitNotDir:
			writeUnaryError(w, rpcErr(codeInvalidArgument, "path %s is not a directory; list a directory", abs))
		default:
			es := parseEntries(out)
			if es == nil {
				es = []entryInfo{}
			}
			// In the order of a walk, as envd lists: each directory's
			// entries by name, a directory's contents right after it.
			sort.Slice(es, func(i, j int) bool { return walkBefore(es[i].Path, es[j].Path) })
			withMetadata(ctx, t, es)
			writeUnary(w, listDirResponse{Entries: es})
		}
	case "MakeDir":
		var req pathRequest
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		abs := t.acct.abs(req.Path)
		_, code, err := run(ctx, t, mkdirScript, abs)
		if err == nil && code == exitExists {
			err = rpcErr(codeAlreadyExists, "path %s already exists", abs)
		}
		s.answerEntry(w, ctx, t, abs, err)
	case "Move":
		var req moveRequest
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		src, dst := t.acct.abs(req.Source), t.acct.abs(req.Destination)
		_, code, err := run(ctx, t, moveScript, src, dst)
		if err == nil && code == exitMissing {
			err = rpcErr(codeNotFound, "path %s does not exist", src)
		}
		s.answerEntry(w, ctx, t, dst, err)
	case "Remove":
		var req pathRequest
		if err := readUnary(r, &req); err != nil {
			writeUnaryError(w, err)
			return
		}
		abs := t.acct.abs(req.Path)
		// A path that is not there is already removed: E2B's envd
		// answers it as done, and the SDK's callers rely on that.
		_, _, err := run(ctx, t, removeScript, abs)
		answer(w, err)
	case "WatchDir":
		s.watchDir(w, r, t)
	case "CreateWatcher", "GetWatcherEvents", "RemoveWatcher":
		s.servePolling(w, r, t, method)
	default:
		writeUnaryError(w, rpcErr(codeUnimplemented, "filesystem.Filesystem/%s is not a method sandboxd serves", method))
	}
}

// walkBefore reports whether a walk meets path a before path b: the first
// element they differ in decides, by name.
func walkBefore(a, b string) bool {
	ea, eb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(ea) && i < len(eb); i++ {
		if ea[i] != eb[i] {
			return ea[i] < eb[i]
		}
	}
	return len(ea) < len(eb)
}

// answerEntry answers with the entry at abs, or err.
func (s *Service) answerEntry(w http.ResponseWriter, ctx context.Context, t target, abs string, err error) {
	var e *entryInfo
	if err == nil {
		e, err = stat(ctx, t, abs)
	}
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, entryResponse{Entry: e})
}

// openWatch checks abs is a directory and opens the agent's watch of it.
func openWatch(ctx context.Context, t target, abs string) (watchStream, error) {
	e, err := stat(ctx, t, abs)
	if err != nil {
		return nil, err
	}
	if e.Type != "FILE_TYPE_DIRECTORY" {
		return nil, rpcErr(codeInvalidArgument, "path %s is not a directory; watch a directory", abs)
	}
	return t.c.Watch(ctx, &proto.WatchRequest{Root: abs})
}

// watchStream is the agent's watch (agent.WatchStream).
type watchStream interface {
	Info() proto.WatchResponse
	Next() (proto.WatchEvent, error)
	Close() error
}

// eventsOf turns one agent event of the watch of base into E2B's, named
// relative to base, the direct children only unless recursive. The agent
// reports each path's net change, where E2B's envd passes on each inotify
// event; look (the file's size, or false if it is not there) restores what
// a user of E2B sees: a new file with content is create then write, and a
// file replaced in one rename (as sandboxd writes a file over another) is
// a write, not a remove.
func eventsOf(ev proto.WatchEvent, base string, recursive bool, look func(string) (int64, bool)) []fsEvent {
	var out []fsEvent
	for _, ch := range ev.Changes {
		name, ok := strings.CutPrefix(ch.Path, strings.TrimSuffix(base, "/")+"/")
		if !ok || name == "" || (!recursive && strings.Contains(name, "/")) {
			continue
		}
		switch {
		case ch.Kind == proto.Created:
			out = append(out, fsEvent{Name: name, Type: "EVENT_TYPE_CREATE"})
			if ch.IsDir {
				continue
			}
			if size, there := look(ch.Path); there && size > 0 {
				out = append(out, fsEvent{Name: name, Type: "EVENT_TYPE_WRITE"})
			}
		case ch.Kind == proto.Deleted:
			typ := "EVENT_TYPE_REMOVE"
			if !ch.IsDir && lookThere(look, ch.Path) {
				typ = "EVENT_TYPE_WRITE"
			}
			out = append(out, fsEvent{Name: name, Type: typ})
		default:
			out = append(out, fsEvent{Name: name, Type: "EVENT_TYPE_WRITE"})
		}
	}
	return out
}

func lookThere(look func(string) (int64, bool), p string) bool {
	_, there := look(p)
	return there
}

// lookTimeout bounds one look at a changed file for eventsOf.
const lookTimeout = 10 * time.Second

// lookIn is eventsOf's look at a path in t's sandbox, through the agent.
func lookIn(ctx context.Context, t target) func(string) (int64, bool) {
	return func(p string) (int64, bool) {
		ctx, cancel := context.WithTimeout(ctx, lookTimeout)
		defer cancel()
		fi, err := t.c.Stat(ctx, &proto.StatRequest{Root: "/", Path: p})
		if err != nil || fi.IsDir {
			return 0, false
		}
		return fi.Size, true
	}
}

func (s *Service) watchDir(w http.ResponseWriter, r *http.Request, t target) {
	var req watchRequest
	if err := readRequest(r, &req); err != nil {
		streamFail(w, err)
		return
	}
	timeout, err := callTimeout(r)
	if err != nil {
		streamFail(w, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if timeout > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, timeout)
		defer c2()
	}
	ws, err := openWatch(ctx, t, t.acct.abs(req.Path))
	if err != nil {
		streamFail(w, err)
		return
	}
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	defer ws.Close()
	st, err := startStream(w, r)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	if st.Send(watchDirResponse{Start: &struct{}{}}) != nil {
		return
	}
	go keepalive(ctx, r, func() error { return st.Send(watchDirResponse{Keepalive: &struct{}{}}) })
	for {
		ev, err := ws.Next()
		if err != nil {
			if ctx.Err() != nil {
				st.End(timeoutWording(ctx, ctx.Err(), timeout))
				return
			}
			var g errGone
			if _, _, cerr := s.conn(r.Context(), t.tenant, t.info.ID); errors.As(cerr, &g) {
				s.sandboxEnded(r.Context(), t)
				st.End(rpcErr(codeUnknown, "the watch was terminated: sandbox %s was killed or its timeout ended", t.info.ID))
				return
			}
			st.End(rpcErr(codeUnavailable, "the watch ended: %v", err))
			return
		}
		evs := eventsOf(ev, ws.Info().Base, req.Recursive, lookIn(ctx, t))
		if req.IncludeEntry {
			withEntries(ctx, t, ws.Info().Base, evs)
		}
		for _, e := range evs {
			if st.Send(watchDirResponse{Filesystem: &e}) != nil {
				return
			}
		}
	}
}
