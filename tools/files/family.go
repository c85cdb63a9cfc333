package files

import (
	"fmt"

	sbxconfig "github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is the file tools (read, write, edit, apply_patch, shell) and the
// process tool as a tool family. The process tool remembers, per run, where
// it last read each process's output; a run's end forgets that.
func Family(opts ...Option) family.Family { return &fam{opts: opts} }

type fam struct {
	family.Base
	opts []Option
	proc *processTool
}

func (*fam) Name() string { return "files" }

func (*fam) Validate(cfg *sbxconfig.Config) error { return cfg.Processes.Check() }

func (f *fam) Register(s *family.Setup) error {
	p := s.Config.Processes
	ts := Tools(append([]Option{WithProcesses(p.MaxRunning, p.RingBytes)}, f.opts...)...)
	for _, t := range ts {
		if pt, ok := t.(*processTool); ok {
			f.proc = pt
		}
	}
	if f.proc == nil {
		return fmt.Errorf("the file tools lack the process tool")
	}
	s.Register(ts...)
	return nil
}

func (f *fam) RunEnded(r tools.Run) {
	if f.proc != nil {
		f.proc.forgetRun(r.ID)
	}
}
