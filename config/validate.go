package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// deploymentName is sandbox.ValidateDeployment's rule: a DNS label of at
// most 40 characters, so it fits every engine's labels and pod names.
var deploymentName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)

// capName is a Linux capability without or with its CAP_ prefix.
var capName = regexp.MustCompile(`^(CAP_)?[A-Z_]{2,32}$`)

// Validate checks every key and returns the first problem as one error message.
func (c *Config) Validate() error {
	names := map[string]bool{}
	hashes := map[string]string{}
	for i, t := range c.Tenants {
		if !tenantName.MatchString(t.Name) {
			return fmt.Errorf("tenants[%d].name: %q is not valid; use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit", i, t.Name)
		}
		if names[t.Name] {
			return fmt.Errorf("tenants[%d].name: tenant %q is listed twice; give each tenant one entry", i, t.Name)
		}
		names[t.Name] = true
		h := strings.ToLower(t.TokenSHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
			return fmt.Errorf("tenants[%d].token_sha256: tenant %s's must be 64 hex digits, the SHA-256 of the token (for example: printf %%s \"$TOKEN\" | sha256sum)", i, t.Name)
		}
		if other, ok := hashes[h]; ok {
			return fmt.Errorf("tenants[%d].token_sha256: tenant %s's is the same as tenant %q's; each tenant needs its own token", i, t.Name, other)
		}
		hashes[h] = t.Name
	}
	if err := c.checkRuntimes(); err != nil {
		return err
	}
	if err := c.checkNetworks(); err != nil {
		return err
	}
	if err := c.checkLifecycles(); err != nil {
		return err
	}
	if err := c.checkWebhooks(); err != nil {
		return err
	}
	if err := c.E2B.Check(); err != nil {
		return err
	}
	for i, p := range c.AllowedHostPaths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("allowed_host_paths[%d]: %q is not an absolute path; write it from the root, such as /srv/checkouts", i, p)
		}
		if filepath.Clean(p) != p {
			return fmt.Errorf("allowed_host_paths[%d]: %q is not in clean form; write it as %q", i, p, filepath.Clean(p))
		}
		if p == "/" {
			return fmt.Errorf("allowed_host_paths[%d]: \"/\" would allow every host directory; name the directories that hold checkouts", i)
		}
	}
	if strings.TrimSpace(c.DefaultImage) != c.DefaultImage {
		return fmt.Errorf("default_image: %q has surrounding spaces; remove them", c.DefaultImage)
	}
	if c.IdleTTL < 0 {
		return errors.New("idle_ttl: is negative; use 0 to turn idle reaping off or a positive duration")
	}
	if c.RunTTL < 0 {
		return errors.New("run_ttl: is negative; use a positive duration such as \"24h\"")
	}
	if c.MaxRunsPerTenant < 0 {
		return errors.New("max_runs_per_tenant: is negative; use a positive number")
	}
	if c.Deployment != "" && !deploymentName.MatchString(c.Deployment) {
		return fmt.Errorf("deployment: %q is not a valid name; use 1 to 40 lower-case letters, digits or '-', starting and ending with a letter or digit, or leave it out for a name derived from the data dir", c.Deployment)
	}
	for tier, w := range map[string]*Worker{"fast": c.Workers.Fast, "good": c.Workers.Good} {
		if w != nil && (len(w.Command) == 0 || w.Command[0] == "") {
			return fmt.Errorf("workers.%s.command: is empty; give the program and its arguments, such as [my-agent, --tier, %s]", tier, tier)
		}
	}
	for i, cp := range c.Docker.ExtraCaps {
		if !capName.MatchString(cp) {
			return fmt.Errorf("docker.extra_caps[%d]: %q is not a capability name; write it like CAP_SYS_PTRACE or SYS_PTRACE", i, cp)
		}
	}
	if c.Docker.AgentBinary != "" && !filepath.IsAbs(c.Docker.AgentBinary) {
		return fmt.Errorf("docker.agent_binary: %q is not an absolute path; give the full path of the sandbox-agent binary", c.Docker.AgentBinary)
	}
	if c.Limits.MaxBodyBytes < 0 || c.Limits.MaxToolBodyBytes < 0 {
		return errors.New("limits.max_body_bytes: body sizes must be positive numbers of bytes; leave it and max_tool_body_bytes out for the defaults")
	}
	if c.Limits.StreamHeartbeat < 0 || c.Limits.MaxStreamBytes < 0 {
		return errors.New("limits.stream_heartbeat: it and max_stream_bytes must not be negative; leave them out for the defaults (15s, 1 MiB)")
	}
	if err := validatePools(c.Pools); err != nil {
		return err
	}
	// The backends' sections are checked whichever backend runs, so that
	// a mistake shows before the day that backend is chosen.
	if err := c.Kubernetes.Validate(); err != nil {
		return err
	}
	if err := c.Containerd.Validate(); err != nil {
		return err
	}
	return c.Replication.Validate()
}

// WorkersConfigured reports whether any worker tier has a command.
func (c *Config) WorkersConfigured() bool { return c.Workers.Fast != nil || c.Workers.Good != nil }

var unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
var cannotUnmarshal = regexp.MustCompile(`^line (\d+): cannot unmarshal !!(\w+) (?:` + "`" + `(.*)` + "`" + ` )?into (\S+)$`)

// describeYAMLError turns yaml's messages into error messages that name the key
// or value and the line, and say what to do.
func describeYAMLError(err error) error {
	var ve valueError
	if errors.As(err, &ve) {
		return ve
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("the file is not valid YAML (%v); fix the syntax at that line", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var msgs []string
	for _, e := range te.Errors {
		if m := unknownField.FindStringSubmatch(e); m != nil {
			msgs = append(msgs, fmt.Sprintf("line %s: unknown key %q; check its spelling against the documented keys", m[1], m[2]))
			continue
		}
		if m := cannotUnmarshal.FindStringSubmatch(e); m != nil {
			what := "a " + yamlKindWord(m[2])
			if m[3] != "" {
				what = fmt.Sprintf("value %q", m[3])
			}
			msgs = append(msgs, fmt.Sprintf("line %s: %s has the wrong type, %s is expected", m[1], what, goTypeWord(m[4])))
			continue
		}
		msgs = append(msgs, e)
	}
	return errors.New(strings.Join(msgs, "; "))
}

func goTypeWord(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map"), strings.HasPrefix(t, "config."):
		return "a mapping"
	case strings.HasPrefix(t, "int"):
		return "a whole number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	}
	return "a " + t
}

func yamlKindWord(tag string) string {
	switch tag {
	case "map":
		return "mapping"
	case "seq":
		return "list"
	}
	return tag
}
