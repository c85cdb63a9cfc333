package config

import "fmt"

// Audit configures the audit record (DESIGN.md §8, The audit record): on
// unless disabled, in DATA_DIR/audit.
type Audit struct {
	// Disabled turns the record off: nothing is written and GET /v1/audit
	// answers 503.
	Disabled bool `yaml:"disabled"`
	// MaxFileBytes is the size past which a new file is begun (default
	// 64 MiB; 4 KiB to 1 GiB).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// Retention is how many files are kept, the newest (default 100); the
	// oldest are removed as new ones begin. Disk use stays below about
	// retention × max_file_bytes.
	Retention int `yaml:"retention"`
}

// Check reports the first bad value of the audit section.
func (a Audit) Check() error {
	switch {
	case a.MaxFileBytes < 0 || a.MaxFileBytes > 0 && a.MaxFileBytes < 4096 || a.MaxFileBytes > 1<<30:
		return fmt.Errorf("audit.max_file_bytes: %d is outside 4096 to 1073741824 (1 GiB); leave it out for 64 MiB", a.MaxFileBytes)
	case a.Retention < 0:
		return fmt.Errorf("audit.retention: %d is negative; give the number of files to keep (at least 1), or leave it out for 100", a.Retention)
	}
	return nil
}
