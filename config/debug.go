package config

import (
	"fmt"
	"time"
)

// DefaultDebugSessionTTL is the hard lifetime of one debug session.
const DefaultDebugSessionTTL = 30 * time.Minute

// Debug holds settings of the debug tool (DESIGN.md §4 debug).
type Debug struct {
	// Disabled turns debug supervision off: the debug tool is not offered.
	Disabled bool `yaml:"disabled"`
	// SessionTTL is the hard lifetime of a session; 0 means 30 minutes.
	SessionTTL Duration `yaml:"session_ttl"`
}

// TTL returns the session lifetime with the default applied.
func (d Debug) TTL() time.Duration {
	if d.SessionTTL == 0 {
		return DefaultDebugSessionTTL
	}
	return d.SessionTTL.D()
}

// Check reports a setting that cannot work, phrased for the person editing
// the file.
func (d Debug) Check() error {
	if d.SessionTTL < 0 {
		return fmt.Errorf("debug.session_ttl: is %s; give a positive duration such as \"30m\"", d.SessionTTL.D())
	}
	return nil
}
