package astgrep

import (
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is ast_grep, ast_edit and resolve as a tool family, over one
// tree-sitter engine shared by all sandboxes (its caches are keyed by
// sandbox). A run's prepared edits are dropped when the run ends; each is
// also kept in its sandbox, so that another replica can resolve it.
func Family(opts ...Option) family.Family { return &fam{opts: opts} }

type fam struct {
	family.Base
	opts    []Option
	dropRun func(runID string)
}

func (*fam) Name() string { return "astgrep" }

func (f *fam) Register(s *family.Setup) error {
	ts, drop := Tools(engine.New(), append([]Option{WithLogger(s.Log.With("tool", "ast_edit"))}, f.opts...)...)
	s.Register(ts...)
	f.dropRun = drop
	return nil
}

func (f *fam) RunEnded(r tools.Run) { f.dropRun(r.ID) }
