package audit

import (
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/tools/family"
)

// DirName is the record's directory inside the data dir.
const DirName = "audit"

// Family is the audit record as a family of the daemon: it checks
// `audit.*`, opens the Log in DATA_DIR/audit, records every tool call of
// the registry and every lifecycle event of the bus, and hands the Log to
// the API, which records every request and serves GET /v1/audit. Close writes and fsyncs what is queued; it
// comes after the HTTP server stopped, so every request's record is in.
func Family() family.Family { return &fam{m: NewMetrics()} }

type fam struct {
	family.Base
	m   *Metrics
	log *Log
}

func (*fam) Name() string { return "audit" }

func (*fam) Validate(cfg *config.Config) error { return cfg.Audit.Check() }

func (f *fam) Register(s *family.Setup) error {
	c := s.Config.Audit
	if c.Disabled {
		return nil
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "sandboxd"
	}
	ret := c.Retention
	if ret == 0 {
		ret = DefaultRetention
	}
	l, err := Open(Options{Dir: filepath.Join(s.DataDir, DirName), Replica: host, MaxFileBytes: c.MaxFileBytes,
		Retention: ret, Metrics: f.m, Logger: s.Log.With("part", "audit")})
	if err != nil {
		return err
	}
	f.log = l
	s.Tools.AddObserver(NewRecorder(l))
	s.Events.Add(NewEventRecorder(l))
	s.Serve(l)
	return nil
}

func (f *fam) Collector() prometheus.Collector { return f.m }

func (f *fam) Close() error {
	if f.log == nil {
		return nil
	}
	return f.log.Close()
}
