package config

import (
	"fmt"
	"path/filepath"
	"time"
)

// Eval configures the eval tool's kernels.
type Eval struct {
	// Disabled turns the eval tool off.
	Disabled bool `yaml:"disabled"`
	// Host runs kernels on the host, confined (see Jail), through a local
	// sandbox-agent, for conversations without a sandbox; a sandbox is never
	// booted for eval. Default: on with no tenants configured (a laptop),
	// off with tenants unless turned on here explicitly.
	Host *bool `yaml:"host"`
	// Jail is what a host kernel may use.
	Jail EvalJail `yaml:"jail"`
	// Budget is a cell's default idle budget (default 5m), not counting time
	// spent in tool() calls; MaxBudget caps timeout_s (default 1h).
	Budget    Duration `yaml:"budget"`
	MaxBudget Duration `yaml:"max_budget"`
	// MaxOutputBytes caps each of stdout and stderr of one cell, head and
	// tail kept (default 64 KiB).
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// Python and Node name the interpreters (default python3 and node).
	Python string `yaml:"python"`
	Node   string `yaml:"node"`
}

// Defaults of the eval keys.
const (
	DefaultEvalBudget    = 5 * time.Minute
	DefaultEvalMaxBudget = time.Hour
	DefaultEvalOutput    = 64 << 10
)

// EvalJail confines host kernels: each conversation's kernels run as a uid
// of their own from [uid_first, uid_first+uid_count), seeing only their
// scratch folder and the system directories, under these limits.
type EvalJail struct {
	UIDFirst   int     `yaml:"uid_first"`    // default 900000
	UIDCount   int     `yaml:"uid_count"`    // default 100000
	MemoryMB   int     `yaml:"memory_mb"`    // default 1024
	Pids       int     `yaml:"pids"`         // default 256
	CPUs       float64 `yaml:"cpus"`         // default 1
	FileSizeMB int     `yaml:"file_size_mb"` // the largest file a kernel writes; default 1024
	// Network gives host kernels the host's network (default: loopback
	// of their own only).
	Network bool `yaml:"network"`
	// ReadOnly are more host paths kernels see read-only, such as an
	// interpreter installed outside /usr.
	ReadOnly []string `yaml:"read_only"`
}

// HostKernels reports whether conversations without a sandbox get host
// kernels: as configured, or by default only where no tenants are
// configured (with tenants, a kernel on sandboxd's host is a risk the
// operator must choose explicitly).
func (e Eval) HostKernels(tenants bool) bool {
	if e.Host != nil {
		return *e.Host
	}
	return !tenants
}

// WithDefaults returns e with every unset key at its default.
func (e Eval) WithDefaults() Eval {
	if e.Budget == 0 {
		e.Budget = Duration(DefaultEvalBudget)
	}
	if e.MaxBudget == 0 {
		e.MaxBudget = Duration(DefaultEvalMaxBudget)
	}
	if e.MaxOutputBytes == 0 {
		e.MaxOutputBytes = DefaultEvalOutput
	}
	if e.Python == "" {
		e.Python = "python3"
	}
	if e.Node == "" {
		e.Node = "node"
	}
	return e
}

// Validate checks the eval keys; the message names the key.
func (e Eval) Validate() error {
	switch {
	case e.Budget < 0:
		return fmt.Errorf("eval.budget: is negative; use a positive duration such as \"5m\"")
	case e.MaxBudget < 0:
		return fmt.Errorf("eval.max_budget: is negative; use a positive duration such as \"1h\"")
	case e.Budget > 0 && e.MaxBudget > 0 && e.Budget > e.MaxBudget:
		return fmt.Errorf("eval.budget: %s is larger than eval.max_budget (%s); raise max_budget or lower budget", e.Budget.D(), e.MaxBudget.D())
	case e.MaxOutputBytes < 0 || (e.MaxOutputBytes > 0 && e.MaxOutputBytes < 1024):
		return fmt.Errorf("eval.max_output_bytes: is %d; use at least 1024 (0 for the default, 64 KiB)", e.MaxOutputBytes)
	}
	return e.Jail.validate()
}

func (j EvalJail) validate() error {
	switch {
	case j.UIDFirst < 0 || j.UIDFirst == 0 && j.UIDCount > 0:
		return fmt.Errorf("eval.jail.uid_first: is %d; give the first uid of the host kernels' range, above 0 (root is never used)", j.UIDFirst)
	case j.UIDCount < 0:
		return fmt.Errorf("eval.jail.uid_count: is %d; give how many uids the range has (0 for the default, 100000)", j.UIDCount)
	case j.UIDFirst > 0 && int64(j.UIDFirst)+int64(max(j.UIDCount, 1)) > 1<<31-1:
		return fmt.Errorf("eval.jail.uid_first: %d with uid_count %d runs past the largest uid 2147483646; lower them", j.UIDFirst, j.UIDCount)
	case j.MemoryMB < 0 || (j.MemoryMB > 0 && j.MemoryMB < 64):
		return fmt.Errorf("eval.jail.memory_mb: is %d; give at least 64 (0 for the default, 1024)", j.MemoryMB)
	case j.Pids < 0 || (j.Pids > 0 && j.Pids < 16):
		return fmt.Errorf("eval.jail.pids: is %d; give at least 16 (0 for the default, 256)", j.Pids)
	case j.CPUs < 0:
		return fmt.Errorf("eval.jail.cpus: is %g; give a positive number of CPUs such as 1 or 0.5", j.CPUs)
	case j.FileSizeMB < 0:
		return fmt.Errorf("eval.jail.file_size_mb: is %d; give a positive size (0 for the default, 1024)", j.FileSizeMB)
	}
	for _, p := range j.ReadOnly {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("eval.jail.read_only: has %q; give clean absolute paths below /", p)
		}
	}
	return nil
}
