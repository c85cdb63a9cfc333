// Package config reads sandboxd's YAML configuration file. Unknown keys are
// errors that name the key and its line, so a typo never silently turns a
// setting off.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults for keys the file leaves out.
const (
	DefaultImage            = "sandboxd-sandbox:latest"
	DefaultRunTTL           = 24 * time.Hour
	DefaultMaxRunsPerTenant = 1000
	DefaultMaxBodyBytes     = 1 << 20  // control endpoints
	DefaultMaxToolBodyBytes = 16 << 20 // tool-call arguments
	// maxFileBytes caps the config file itself; a bigger one is a mistake.
	maxFileBytes = 4 << 20
)

// Config is the whole configuration. The zero value is not useful; use
// Default or Load.
type Config struct {
	// Tenants and the SHA-256 of their bearer tokens. With none, sandboxd
	// makes one admin token in the data dir.
	Tenants []Tenant `yaml:"tenants"`
	// AllowedHostPaths are the host directories under which a sandbox's
	// workspace.host_path may lie.
	AllowedHostPaths []string `yaml:"allowed_host_paths"`
	// DefaultImage is used when a sandbox request names no image.
	DefaultImage string `yaml:"default_image"`
	// IdleTTL removes sandboxes idle this long; 0 turns reaping off.
	IdleTTL Duration `yaml:"idle_ttl"`
	// RunTTL ends runs idle this long.
	RunTTL Duration `yaml:"run_ttl"`
	// MaxRunsPerTenant caps the live runs of one tenant.
	MaxRunsPerTenant int `yaml:"max_runs_per_tenant"`
	// Deployment names this sandboxd's deployment: it labels every sandbox
	// it makes and sees only its own, so deployments sharing an engine
	// never list, adopt, reap or delete each other's. Replicas of one
	// deployment share the name. "" means a name derived from the data dir.
	Deployment string `yaml:"deployment"`
	// AdoptUnlabelledSandboxes makes this deployment also own the sandboxes
	// made before deployments existed (no deployment label). Set it in the
	// one deployment per engine that made them.
	AdoptUnlabelledSandboxes bool `yaml:"adopt_unlabelled_sandboxes"`
	// Pools keep sandboxes of an image started and attached, so that a
	// create for that image claims one (pools.go).
	Pools []Pool `yaml:"pools"`
	// Workers are the commands that execute background workers per tier.
	Workers   Workers   `yaml:"workers"`
	Docker    Docker    `yaml:"docker"`
	Limits    Limits    `yaml:"limits"`
	Questions Questions `yaml:"questions"` // question port and workers per run (questions.go)
	Debug     Debug     `yaml:"debug"`
	LSP       LSP       `yaml:"lsp"`
	Eval      Eval      `yaml:"eval"`      // persistent kernels of the eval tool (eval.go)
	Processes Processes `yaml:"processes"` // long-lived processes (processes.go)

	Kubernetes Kubernetes `yaml:"kubernetes"` // the kubernetes backend (kubernetes.go)
	Containerd Containerd `yaml:"containerd"` // the containerd backend (containerd.go)

	Replication Replication `yaml:"replication"` // replicas on Kubernetes (replication.go)

	// DefaultNetwork is the network mode of a sandbox whose request names
	// none ("none" when unset; a tenant may have its own).
	DefaultNetwork string `yaml:"default_network"`
	// Runtime is the runtime of a sandbox whose request and tenant name
	// none: "runc" (the default) or "gvisor" (runtime.go).
	Runtime string `yaml:"runtime"`
	// Egress is the deployment's egress policy for network "proxy"
	// (egress.go).
	Egress Egress `yaml:"egress"`
	// Lifecycle is what idleness does to sandboxes (lifecycle.go).
	Lifecycle Lifecycle `yaml:"lifecycle"`
	// Preview is the links to a sandbox's ports (preview.go).
	Preview Preview `yaml:"preview"`
	// E2B is the E2B API served under /e2b (e2b.go).
	E2B E2B `yaml:"e2b"`
	// Audit is the audit record (audit.go).
	Audit Audit `yaml:"audit"`
	// Secrets are the credentials of the admin token when no tenants are
	// configured (a tenant has its own).
	Secrets []Secret `yaml:"secrets"`
	// Webhooks get the admin token's lifecycle events when no tenants are
	// configured (a tenant has its own); WebhooksMaxAge is how long an
	// event is retried, unless a webhook says (webhooks.go).
	Webhooks       []Webhook `yaml:"webhooks"`
	WebhooksMaxAge Duration  `yaml:"webhooks_max_age"`

	// Path is the file this was read from; "" when sandboxd runs without a
	// config file (which lets the admin token name any host path).
	Path string `yaml:"-"`
}

// Tenant is one tenant and the hex SHA-256 of its token.
type Tenant struct {
	Name        string `yaml:"name"`
	TokenSHA256 string `yaml:"token_sha256"`
	// DefaultNetwork overrides the deployment's default_network.
	DefaultNetwork string `yaml:"default_network"`
	// Egress is the tenant's layer of the egress policy (egress.go).
	Egress *TenantEgress `yaml:"egress"`
	// Secrets are the credentials this tenant's sandboxes may use.
	Secrets []Secret `yaml:"secrets"`
	// Lifecycle overrides the deployment's lifecycle, key by key.
	Lifecycle *Lifecycle `yaml:"lifecycle"`
	// Runtime overrides the deployment's runtime; Runtimes are those the
	// tenant may ask for (empty: every runtime the deployment serves).
	Runtime  string   `yaml:"runtime"`
	Runtimes []string `yaml:"runtimes"`
	// ReadOnlyRoot makes the tenant's sandboxes' root file systems
	// read-only unless a request says otherwise.
	ReadOnlyRoot bool `yaml:"read_only_root"`
	// Webhooks get this tenant's lifecycle events (webhooks.go).
	Webhooks []Webhook `yaml:"webhooks"`
}

// Workers holds the command per worker tier.
type Workers struct {
	Fast *Worker `yaml:"fast"`
	Good *Worker `yaml:"good"`
}

// Worker is the command that executes one worker; it gets the brief on stdin.
type Worker struct {
	Command []string `yaml:"command"`
}

// Docker holds settings of the Docker backend.
type Docker struct {
	// AgentBinary is the sandbox-agent binary bind-mounted into sandboxes;
	// "" means the one beside the sandboxd executable.
	AgentBinary string `yaml:"agent_binary"`
	// ExtraCaps are Linux capabilities added back after dropping all.
	ExtraCaps []string `yaml:"extra_caps"`
}

// Limits caps request sizes and streamed tool calls.
type Limits struct {
	MaxBodyBytes     int64 `yaml:"max_body_bytes"`
	MaxToolBodyBytes int64 `yaml:"max_tool_body_bytes"`
	// StreamHeartbeat is how often a streamed tool call that prints nothing
	// gets a heartbeat (0: 15 s); MaxStreamBytes caps the text one streamed
	// call shows live (0: 1 MiB). The call's result is not capped by them.
	StreamHeartbeat Duration `yaml:"stream_heartbeat"`
	MaxStreamBytes  int64    `yaml:"max_stream_bytes"`
}

// Default returns the configuration used when there is no file.
func Default() *Config {
	c := &Config{}
	c.applyDefaults()
	return c
}

// Check validates a part of the config that another package owns (a tool
// family's section). Its error names the key and says what to do, as
// "lsp.servers[0].command: is empty; give ..."; Load prefixes the file.
type Check func(*Config) error

// Load reads and validates the file at path, then runs checks on it in
// order; an empty path yields Default(), checked the same way. Every error
// has one shape: "config FILE: key.path: what is wrong; what to do".
func Load(path string, checks ...Check) (*Config, error) {
	c, err := load(path)
	if err != nil {
		return nil, err
	}
	for _, check := range checks {
		if err := check(c); err != nil {
			if path == "" {
				return nil, fmt.Errorf("config (none given, the defaults): %w", err)
			}
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	return c, nil
}

func load(path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: cannot be opened: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config %s: cannot be read: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("config %s: is larger than %d bytes; it should be a short YAML file", path, maxFileBytes)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Parse decodes and validates YAML text.
func Parse(data []byte) (*Config, error) {
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, describeYAMLError(err)
	}
	// A second document is almost always a stray "---"; refuse it rather
	// than ignore half the file.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("the file holds more than one YAML document; keep every key in one document")
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) applyDefaults() {
	if c.DefaultImage == "" {
		c.DefaultImage = DefaultImage
	}
	if c.RunTTL == 0 {
		c.RunTTL = Duration(DefaultRunTTL)
	}
	if c.MaxRunsPerTenant == 0 {
		c.MaxRunsPerTenant = DefaultMaxRunsPerTenant
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Limits.MaxToolBodyBytes == 0 {
		c.Limits.MaxToolBodyBytes = DefaultMaxToolBodyBytes
	}
	c.Replication.applyDefaults()
}
