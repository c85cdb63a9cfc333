package sandboxtest

import (
	"fmt"
	"os"
	"testing"
)

// Image is the test image: $SANDBOXD_TEST_IMAGE, else def.
func Image(def string) string {
	if img := os.Getenv("SANDBOXD_TEST_IMAGE"); img != "" {
		return img
	}
	return def
}

// Main is a TestMain for tests that need a sandbox-agent binary. When gate
// names an environment variable that is not "1", the tests run without
// one (they skip what needs it). Otherwise *bin is $SANDBOXD_AGENT_BIN or
// an agent built into a temporary directory, setup (if any) runs with that
// directory, and the directory goes when the tests end. It exits.
func Main(m *testing.M, gate string, bin *string, setup func(dir string) error) {
	if gate != "" && os.Getenv(gate) != "1" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "sandboxd-test-")
	if err == nil {
		if *bin = os.Getenv("SANDBOXD_AGENT_BIN"); *bin == "" {
			*bin, err = BuildAgent(dir)
		}
	}
	if err == nil && setup != nil {
		err = setup(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
