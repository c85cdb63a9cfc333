package main

import (
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"time"
)

// options are one command's flags.
type options struct {
	kubeconfig string
	namespace  string
	release    string
	timeout    time.Duration
	verbose    bool

	// deploy only
	replicas     int
	port         int
	image        string
	defaultImage string
}

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// releaseName is also the deployment name sandboxd labels its objects
	// with (config deployment: 1 to 40 of [a-z0-9-]).
	releaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)
)

func parseFlags(cmd string, args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("sandboxd-cluster "+cmd, flag.ContinueOnError)
	var help strings.Builder
	fs.SetOutput(&help)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's kubeconfig (default $KUBECONFIG)")
	fs.StringVar(&o.namespace, "namespace", "sandboxd-replicas", "namespace of the release and of its sandboxes")
	fs.StringVar(&o.release, "release", "sandboxd", "Helm release name, also sandboxd's deployment name")
	fs.BoolVar(&o.verbose, "verbose", false, "print Helm's own log")
	if cmd == "deploy" {
		fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for every replica")
		fs.IntVar(&o.replicas, "replicas", 3, "replicas of sandboxd")
		fs.IntVar(&o.port, "port", 27800, "port of replica 0 on 127.0.0.1; replica i listens on port+i")
		fs.StringVar(&o.image, "image", "sandboxd:latest", "sandboxd's image, imported into the node (make images-sandboxd)")
		fs.StringVar(&o.defaultImage, "default-image", envOr("SANDBOXD_TEST_IMAGE", "sandboxd-sandbox:latest"), "the sandboxes' image (default $SANDBOXD_TEST_IMAGE or sandboxd-sandbox:latest)")
	} else {
		fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for everything to be gone")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help.Reset()
			fs.PrintDefaults()
			return o, usagef("flags of %s:\n%s", fs.Name(), help.String())
		}
		return o, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return o, usagef("%s takes no arguments, got %q; its settings are flags (--help lists them)", fs.Name(), fs.Args())
	}
	return o, o.validate(cmd)
}

// validate says what is wrong with the flags, one sentence each.
func (o options) validate(cmd string) error {
	switch {
	case o.kubeconfig == "":
		return usagef("no kubeconfig: pass --kubeconfig or set KUBECONFIG (make cluster-up writes it; source /var/lib/sandboxd-k8s/env)")
	case !dnsLabel.MatchString(o.namespace):
		return usagef("--namespace %q is not a namespace name; use lower-case letters, digits and '-'", o.namespace)
	case !releaseName.MatchString(o.release):
		return usagef("--release %q cannot name sandboxd's deployment; use 1 to 40 lower-case letters, digits and '-', starting and ending with a letter or digit", o.release)
	case o.timeout <= 0:
		return usagef("--timeout %s must be positive", o.timeout)
	}
	if cmd != "deploy" {
		return nil
	}
	switch {
	case o.replicas < 1:
		return usagef("--replicas %d: run at least 1 (undeploy removes the release)", o.replicas)
	case o.port < 1 || o.port+o.replicas-1 > 65535:
		return usagef("--port %d with %d replicas leaves the ports 1-65535 (replica i listens on port+i); pick a lower port", o.port, o.replicas)
	case o.image == "" || o.defaultImage == "":
		return usagef("--image and --default-image must name images")
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
