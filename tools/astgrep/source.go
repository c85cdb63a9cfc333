package astgrep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
)

// agentSource reads files of one sandbox through its agent, many per round
// trip. Cache keys carry the sandbox's id so sandboxes never share entries.
//
// The literal prefilter runs here on contents read in large batches rather
// than as a grep inside the sandbox: the files that pass must be read
// anyway to be parsed, so a remote grep would cost a process and a second
// read of every candidate, and would depend on the image's grep. Files the
// cache already holds (same size and mtime in the walk) are not read
// at all.
type agentSource struct {
	conn *tools.SandboxConn
	max  int64
}

var _ engine.Source = (*agentSource)(nil)

func (s *agentSource) key(abs string) string { return s.conn.ID + "\x00" + abs }

func (s *agentSource) abs(key string) string { return key[strings.IndexByte(key, 0)+1:] }

// Read implements engine.Source with one ReadFiles per batch.
func (s *agentSource) Read(ctx context.Context, keys []string) ([][]byte, error) {
	paths := make([]string, len(keys))
	for i, k := range keys {
		paths[i] = s.abs(k)
	}
	resp, err := s.conn.Agent.ReadFiles(ctx, &proto.ReadFilesRequest{Root: s.conn.Workspace, Paths: paths, MaxBytesEach: s.max, MaxTotal: 64 << 20})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, f := range resp.Files {
		if i < len(out) && f.Skipped == "" {
			out[i] = f.Data
			if out[i] == nil {
				out[i] = []byte{}
			}
		}
	}
	return out, nil
}

// target is what a search runs over.
type target struct {
	abs   string // the path searched, absolute in the sandbox
	dir   bool
	lang  *engine.Language
	files []engine.FileKey
	// truncated is set when the walk stopped at the file cap.
	truncated bool
	// skipped are the directories the walk did not enter, and why;
	// skippedMore counts those beyond the agent's report cap.
	skipped     []proto.SkippedDir
	skippedMore int
}

// followSync bounds the wait, before a search, for the changes made so
// far to have reached the cache.
const followSync = time.Second

// follow subscribes the engine's cache to the sandbox's workspace watch
// (once per agent session: the client keeps the subscription by name)
// and waits until the changes made so far are applied: a file a command
// rewrote is read again even when its size and modification time look
// the same. Without a watch the size and time in each key stay the check.
func (s *agentSource) follow(ctx context.Context, eng *engine.Engine) {
	if s.conn.Agent == nil {
		return
	}
	prefix := s.conn.ID + "\x00"
	sub := s.conn.Agent.Subscribe(s.conn.Workspace, "astgrep", func(ev proto.WatchEvent) {
		if ev.Overflow {
			eng.ForgetPrefix(prefix)
			return
		}
		keys := make([]string, 0, len(ev.Changes))
		for _, c := range ev.Changes {
			if c.IsDir {
				eng.ForgetPrefix(s.key(c.Path) + "/")
				continue
			}
			keys = append(keys, s.key(c.Path))
		}
		eng.Forget(keys...)
	})
	ctx, cancel := context.WithTimeout(ctx, followSync)
	defer cancel()
	_ = sub.Sync(ctx)
}

// findTarget stats the path, settles the language and lists the files.
func (c *config) findTarget(ctx context.Context, src *agentSource, abs, langArg string) (*target, string, error) {
	src.follow(ctx, c.eng)
	reg := c.eng.Registry()
	st, err := src.conn.Agent.Stat(ctx, &proto.StatRequest{Root: src.conn.Workspace, Path: abs})
	if err != nil {
		if errdefsNotFound(err) {
			return nil, fmt.Sprintf("path %s does not exist; give a file or directory inside the workspace", abs), nil
		}
		return nil, "", err
	}
	t := &target{abs: abs, dir: st.IsDir}
	if langArg != "" {
		l, ok := reg.Lookup(langArg)
		if !ok {
			if why, missing := reg.Unavailable(langArg); missing {
				return nil, fmt.Sprintf("language %q is not in this build: %s", langArg, why), nil
			}
			return nil, fmt.Sprintf("language %q is not a shipped grammar; use one of: %s", langArg, langList(reg)), nil
		}
		t.lang = l
	} else if !st.IsDir {
		l, ok := reg.ForPath(abs)
		if why, missing := reg.UnavailableForPath(abs); !ok && missing {
			return nil, fmt.Sprintf("%s is Dart, which is not in this build: %s", abs, why), nil
		}
		if !ok {
			return nil, fmt.Sprintf("cannot tell the language of %s from its extension; give language, one of: %s", abs, langList(reg)), nil
		}
		t.lang = l
	} else {
		return nil, fmt.Sprintf("%s is a directory, so give language, one of: %s", abs, langList(reg)), nil
	}
	if !st.IsDir {
		if st.Size > c.maxFileSize {
			return nil, fmt.Sprintf("%s has %d bytes, more than the %d bytes ast_grep searches", abs, st.Size, c.maxFileSize), nil
		}
		t.files = []engine.FileKey{{Path: src.key(abs), Size: st.Size, ModTime: st.ModTime}}
		return t, "", nil
	}
	// Only .git is never entered; node_modules, vendor and build output
	// are left out when a .gitignore says so, and the result names them.
	w, err := src.conn.Agent.Walk(ctx, &proto.WalkRequest{Root: src.conn.Workspace, Path: abs, Gitignore: true, SkipDirs: walkSkipDirs,
		MaxSize: c.maxFileSize, MaxEntries: c.maxFiles, ReportSkipped: true})
	if err != nil {
		return nil, "", err
	}
	t.truncated = w.Truncated
	t.skipped, t.skippedMore = w.Skipped, w.SkippedMore
	for _, f := range w.Files {
		if f.IsDir || !t.lang.Matches(f.Path) {
			continue
		}
		t.files = append(t.files, engine.FileKey{Path: src.key(path.Join(w.Base, f.Path)), Size: f.Size, ModTime: f.ModTime})
	}
	engine.SortFiles(t.files)
	return t, "", nil
}

// walkSkipDirs is the one directory a search never enters: the
// repository's own store, which holds no source.
var walkSkipDirs = []string{".git"}

// skippedNote says which directories the walk left out and why, as one
// line of a result: "Not searched: web/node_modules/ (.gitignore)." At
// most ten are named, the rest counted. A repository's own .git is left
// unsaid: every repository has one and nobody expects it searched.
func (t *target) skippedNote() string {
	var parts []string
	rest := t.skippedMore
	for _, d := range t.skipped {
		switch {
		case path.Base(d.Dir) == ".git" && d.Reason == proto.SkipReasonList:
		case len(parts) == 10:
			rest++
		default:
			parts = append(parts, d.Dir+"/ ("+d.Reason+")")
		}
	}
	if len(parts) == 0 && rest == 0 {
		return ""
	}
	note := "Not searched: " + strings.Join(parts, ", ")
	switch {
	case rest > 0 && len(parts) == 0:
		note += fmt.Sprintf("%d directories", rest)
	case rest > 0:
		note += fmt.Sprintf(" and %d more", rest)
	}
	return note + "."
}

func errdefsNotFound(err error) bool { return errors.Is(err, errdefs.ErrNotFound) }

// langList names the grammars for an error, and why Dart is not among
// them when this binary lacks its grammar.
func langList(reg *engine.Registry) string {
	out := strings.Join(reg.Names(), ", ")
	if why, missing := reg.Unavailable("dart"); missing {
		out += " (no dart: " + why + ")"
	}
	return out
}

// grammarHelp is the language field's description in the tools' schemas:
// the grammars of this build, and why Dart is not one when it is not.
func grammarHelp(reg *engine.Registry) string {
	names := reg.Names()
	out := "Grammar: " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if why, missing := reg.Unavailable("dart"); missing {
		out += " (no dart: " + why + ")"
	}
	return out + ". Inferred from a file's extension; required for a directory."
}

// jsonString quotes s for a JSON schema built as text.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
