package config

import (
	"fmt"
	"path/filepath"
	"regexp"
)

// Containerd holds settings of the containerd backend. The agent binary and
// extra capabilities are shared with the Docker backend (docker.agent_binary,
// docker.extra_caps).
type Containerd struct {
	// Address is containerd's socket (default /run/containerd/containerd.sock).
	Address string `yaml:"address"`
	// Namespace holds sandboxd's containers and images (default "sandboxd").
	Namespace string `yaml:"namespace"`
	// Snapshotter unpacks images (default "overlayfs").
	Snapshotter string `yaml:"snapshotter"`
	// Runtime is the shim of runc sandboxes (default
	// "io.containerd.runc.v2"). Sandboxes of runtime gvisor run under the
	// runc shim with runsc as its binary, whatever this says.
	Runtime string `yaml:"runtime"`
	// Runsc is gVisor's runsc binary (default: runsc found in PATH at
	// start); without one that runs, runtime gvisor is refused.
	Runsc string `yaml:"runsc"`
}

// containerdName is a containerd identifier: namespaces, snapshotters.
var containerdName = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$`)

// runtimeName is a shim name such as io.containerd.runc.v2.
var runtimeName = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9]+)+$`)

// Validate checks the containerd keys; the message names the key.
func (c Containerd) Validate() error {
	switch {
	case c.Address != "" && !filepath.IsAbs(c.Address):
		return fmt.Errorf("containerd.address: %q is not an absolute socket path; use e.g. /run/containerd/containerd.sock", c.Address)
	case c.Namespace != "" && (len(c.Namespace) > 76 || !containerdName.MatchString(c.Namespace)):
		return fmt.Errorf("containerd.namespace: %q is not a valid containerd namespace; use letters, digits, '.', '_' and '-', starting and ending with a letter or digit", c.Namespace)
	case c.Snapshotter != "" && !containerdName.MatchString(c.Snapshotter):
		return fmt.Errorf("containerd.snapshotter: %q is not a valid snapshotter name; use e.g. overlayfs or native", c.Snapshotter)
	case c.Runtime != "" && !runtimeName.MatchString(c.Runtime):
		return fmt.Errorf("containerd.runtime: %q is not a runtime name; use the io.containerd.<name>.<version> form, e.g. io.containerd.runc.v2", c.Runtime)
	case c.Runsc != "" && !filepath.IsAbs(c.Runsc):
		return fmt.Errorf("containerd.runsc: %q is not an absolute path; use e.g. /usr/bin/runsc, or leave it out to find runsc in PATH", c.Runsc)
	}
	return nil
}
