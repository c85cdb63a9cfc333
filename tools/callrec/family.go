package callrec

import (
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is the per-run call log as a tool family: the recorder observes
// every call, the API serves it (GET /v1/runs/{id}/calls), and a run's
// calls are forgotten when the run ends. The calls live in memory only;
// after a restart the log starts empty.
func Family(opts ...Option) family.Family { return &fam{opts: opts} }

type fam struct {
	family.Base
	opts []Option
	rec  *Recorder
}

func (*fam) Name() string { return "calls" }

func (f *fam) Register(s *family.Setup) error {
	f.rec = New(f.opts...)
	s.Tools.AddObserver(f.rec)
	s.Serve(f.rec)
	return nil
}

func (f *fam) RunEnded(r tools.Run) { f.rec.Forget(r.ID) }
