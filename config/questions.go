package config

import "fmt"

// Questions configures the question port (ask_user, approval prompts) and
// the workers' per-run bound. Every key may be left out.
type Questions struct {
	// DefaultExpiry is how long a question stays open when its caller
	// names no time (default 10m).
	DefaultExpiry Duration `yaml:"default_expiry"`
	// MaxExpiry caps what a caller may ask for (default 1h).
	MaxExpiry Duration `yaml:"max_expiry"`
	// Heartbeat is how often an open stream gets a keep-alive comment,
	// which is how a dead stream is noticed (default 15s).
	Heartbeat Duration `yaml:"heartbeat"`
	// MaxPendingPerSpace caps the open questions of one space (default 200).
	MaxPendingPerSpace int `yaml:"max_pending_per_space"`
	// MaxWorkersPerRun caps the vibe workers one run may have (default 8).
	MaxWorkersPerRun int `yaml:"max_workers_per_run"`
}

// Check reports the first bad value of the questions section.
func (q Questions) Check() error {
	switch {
	case q.DefaultExpiry < 0 || q.MaxExpiry < 0 || q.Heartbeat < 0:
		return fmt.Errorf("questions.default_expiry: it, max_expiry and heartbeat must be positive durations, such as \"10m\"; leave a key out for its default")
	case q.MaxExpiry > 0 && q.DefaultExpiry > q.MaxExpiry:
		return fmt.Errorf("questions.default_expiry: %v is longer than max_expiry %v; raise max_expiry or shorten default_expiry", q.DefaultExpiry.D(), q.MaxExpiry.D())
	case q.MaxPendingPerSpace < 0 || q.MaxWorkersPerRun < 0:
		return fmt.Errorf("questions.max_pending_per_space: it and max_workers_per_run must be positive numbers; leave them out for the defaults")
	}
	return nil
}
