// Package dockertest opens the Docker backend for the tests of packages
// above the backends (the tools' tests), so that their shared test
// helpers take any sandbox.Backend and only a test's own files name the
// engine it runs on.
package dockertest

import (
	"os"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox/docker"
	"github.com/sandboxd/sandboxd/sandbox/sandboxtest"
)

// Backend is a Docker backend whose sandboxes default to image, closed
// when the test ends; it skips the test unless SANDBOXD_TEST_DOCKER=1. The
// agent is $SANDBOXD_AGENT_BIN, else one built for the test.
func Backend(t testing.TB, image string) *docker.Backend {
	t.Helper()
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("set SANDBOXD_TEST_DOCKER=1 to run this test on a Docker sandbox")
	}
	bin := os.Getenv("SANDBOXD_AGENT_BIN")
	if bin == "" {
		var err error
		if bin, err = sandboxtest.BuildAgent(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	b, err := docker.New(docker.WithAgentBinary(bin), docker.WithDefaultImage(image))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
