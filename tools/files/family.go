package files

import "github.com/sandboxd/sandboxd/tools/family"

// Family is the file tools (read, write, edit, apply_patch, shell) as a
// tool family: they keep nothing between calls, so they only register.
func Family(opts ...Option) family.Family { return &fam{opts: opts} }

type fam struct {
	family.Base
	opts []Option
}

func (*fam) Name() string { return "files" }

func (f *fam) Register(s *family.Setup) error {
	s.Register(Tools(f.opts...)...)
	return nil
}
