package config

import "fmt"

// Processes configures the long-lived processes of the process tool and of
// /v1/sandboxes/{id}/processes (kept by the sandbox's agent).
type Processes struct {
	// MaxRunning caps the processes running at once in one sandbox
	// (default 32); a start beyond it is refused naming the limit.
	MaxRunning int `yaml:"max_running"`
	// RingBytes is the output kept per process, the newest (default 4 MiB,
	// at most 64 MiB); older output is dropped and a reader told how much.
	RingBytes int64 `yaml:"ring_bytes"`
}

// Check reports the first bad value of the processes section.
func (p Processes) Check() error {
	switch {
	case p.MaxRunning < 0:
		return fmt.Errorf("processes.max_running: %d is negative; give a positive number or leave it out for 32", p.MaxRunning)
	case p.RingBytes < 0 || p.RingBytes > 64<<20:
		return fmt.Errorf("processes.ring_bytes: %d is outside 0 to 67108864 (64 MiB); leave it out for 4 MiB", p.RingBytes)
	case p.RingBytes > 0 && p.RingBytes < 64<<10:
		return fmt.Errorf("processes.ring_bytes: %d is below 65536 (64 KiB); give at least that, or leave it out for 4 MiB", p.RingBytes)
	}
	return nil
}
