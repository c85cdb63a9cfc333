package config

import (
	"strings"
	"testing"
)

func TestContainerdKeys(t *testing.T) {
	c, err := Parse([]byte("containerd:\n  address: /run/containerd/containerd.sock\n  namespace: sandboxd-prod\n  snapshotter: overlayfs\n  runtime: io.containerd.runsc.v1\n  runsc: /usr/local/bin/runsc\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Containerd.Validate(); err != nil || c.Containerd.Namespace != "sandboxd-prod" || c.Containerd.Runtime != "io.containerd.runsc.v1" || c.Containerd.Runsc != "/usr/local/bin/runsc" {
		t.Fatalf("containerd = %+v, %v", c.Containerd, err)
	}
	for _, bad := range []struct {
		c   Containerd
		key string
	}{
		{Containerd{Address: "containerd.sock"}, "containerd.address"},
		{Containerd{Namespace: "no/slash"}, "containerd.namespace"},
		{Containerd{Snapshotter: "-x"}, "containerd.snapshotter"},
		{Containerd{Runtime: "runc"}, "containerd.runtime"},
		{Containerd{Runsc: "bin/runsc"}, "containerd.runsc"},
	} {
		if err := bad.c.Validate(); err == nil || !strings.Contains(err.Error(), bad.key) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", bad.c, err, bad.key)
		}
	}
}
