package ports

import (
	"fmt"
	"os"
	"strings"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/tools/family"
)

// Family is the sandboxes' ports and preview links in the daemon's one
// family shape: the preview section checked at load, the Service built at
// Register (signing with the replicas' peer key when replication is on,
// so a link made on one replica opens on any) and handed to the API,
// its idle connections closed at Close. It registers no tools.
func Family() family.Family { return &fam{} }

type fam struct {
	family.Base
	s *Service
}

func (*fam) Name() string { return "ports" }

func (*fam) Validate(cfg *config.Config) error { return cfg.Preview.Check() }

func (f *fam) Register(s *family.Setup) error {
	o := Options{DataDir: s.DataDir, Domain: s.Config.Preview.Domain, Annotate: s.Annotate, Log: s.Log.With("component", "ports"), Events: s.Events}
	o.DefaultTTL, o.MaxTTL = s.Config.Preview.TTLs()
	if rc := s.Config.Replication; rc.Enabled && rc.PeerSecretFile != "" {
		key, err := os.ReadFile(rc.PeerSecretFile)
		if err != nil {
			return fmt.Errorf("preview links are signed with the peer secret, which cannot be read: %w", err)
		}
		o.Secret = []byte(strings.TrimSpace(string(key)))
	}
	svc, err := New(o)
	if err != nil {
		return err
	}
	f.s = svc
	s.Serve(svc)
	return nil
}

func (f *fam) Close() error {
	if f.s == nil {
		return nil
	}
	return f.s.Close()
}
