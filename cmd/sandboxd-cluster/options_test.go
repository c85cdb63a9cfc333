package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestDeployDefaults(t *testing.T) {
	o := deployOptions(t)
	if o.replicas != 3 || o.namespace != "sandboxd-replicas" || o.port != 27800 || o.image != "sandboxd:latest" ||
		o.defaultImage != "sandboxd-sandbox:latest" || o.timeout != 5*time.Minute || o.kubeconfig != "/tmp/kubeconfig" {
		t.Errorf("defaults = %+v", o)
	}
	t.Setenv("SANDBOXD_TEST_IMAGE", "sandboxd-base:bookworm")
	if o, _ := parseFlags("deploy", nil); o.defaultImage != "sandboxd-base:bookworm" {
		t.Errorf("--default-image = %q, want $SANDBOXD_TEST_IMAGE", o.defaultImage)
	}
}

// Bad command lines end with exit status 2 and one error message naming the
// flag and what to do.
func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"deploy"}, "no kubeconfig: pass --kubeconfig or set KUBECONFIG"},
		{"k", []string{"deploy", "--replicas", "0"}, "--replicas 0: run at least 1"},
		{"k", []string{"deploy", "--replicas", "3", "--port", "65534"}, "leaves the ports 1-65535"},
		{"k", []string{"deploy", "--namespace", "Not_A_Namespace"}, "is not a namespace name"},
		{"k", []string{"undeploy", "--release", "a.b"}, "--release \"a.b\" cannot name sandboxd's deployment"},
		{"k", []string{"deploy", "extra"}, "takes no arguments"},
		{"k", []string{"deploy", "--replica", "2"}, "flag provided but not defined: -replica"},
		{"k", []string{"undeploy", "--replicas", "2"}, "flag provided but not defined: -replicas"},
		{"k", []string{"deploy", "--timeout", "0s"}, "--timeout 0s must be positive"},
		{"k", []string{"scale"}, `unknown command "scale"`},
		{"k", nil, "Usage:"},
	} {
		t.Setenv("KUBECONFIG", tc.env)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 and %q", tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}

// A cluster that is down is said at once, not after the whole timeout.
func TestClusterDown(t *testing.T) {
	kc := t.TempDir() + "/kubeconfig"
	writeKubeconfig(t, kc, "https://127.0.0.1:1")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"deploy", "--kubeconfig", kc, "--timeout", "1m"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "does not answer") || !strings.Contains(stderr.String(), "make cluster-up") || stdout.Len() != 0 {
		t.Errorf("deploy against no API server: exit %d, stderr %q, stdout %q", code, stderr.String(), stdout.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s to see the API server is not there", d)
	}
}
