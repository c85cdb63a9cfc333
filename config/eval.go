package config

import (
	"fmt"
	"time"
)

// Eval configures the eval tool's kernels.
type Eval struct {
	// Disabled turns the eval tool off.
	Disabled bool `yaml:"disabled"`
	// Host runs kernels on the host, through a local sandbox-agent, for
	// conversations without a sandbox (default true; a sandbox is never
	// booted for eval).
	Host *bool `yaml:"host"`
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

// HostKernels reports whether conversations without a sandbox get host kernels.
func (e Eval) HostKernels() bool { return e.Host == nil || *e.Host }

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
		return fmt.Errorf("eval.budget is negative; use a positive duration such as \"5m\"")
	case e.MaxBudget < 0:
		return fmt.Errorf("eval.max_budget is negative; use a positive duration such as \"1h\"")
	case e.Budget > 0 && e.MaxBudget > 0 && e.Budget > e.MaxBudget:
		return fmt.Errorf("eval.budget (%s) is larger than eval.max_budget (%s); raise max_budget or lower budget", e.Budget.D(), e.MaxBudget.D())
	case e.MaxOutputBytes < 0 || (e.MaxOutputBytes > 0 && e.MaxOutputBytes < 1024):
		return fmt.Errorf("eval.max_output_bytes is %d; use at least 1024 (0 for the default, 64 KiB)", e.MaxOutputBytes)
	}
	return nil
}
