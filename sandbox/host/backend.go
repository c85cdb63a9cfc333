// Package host is the sandbox backend without isolation: a sandbox is a
// folder DATA/sandboxes/<id>/ with a workspace/ and a meta.json holding what
// other backends keep in labels, and its agent is the same sandbox-agent run
// as a local process. Nothing is contained: the agent and everything it
// spawns run as sandboxd's user with full access to the machine and its
// network, and resource limits are ignored. It is for a laptop, never for
// tenants.
package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// maxSocketPath keeps a unix socket path under the kernel's 108-byte limit.
const maxSocketPath = 100

// Backend is a sandbox.Backend on the local machine. The filesystem is its
// only state; it keeps nothing in memory.
type Backend struct {
	root      string // DATA/sandboxes
	agentPath string
	log       *slog.Logger
	dep       sandbox.Deployment
	metaMu    sync.Mutex // serializes the changes of meta.json after creation
}

var (
	_ sandbox.Backend           = (*Backend)(nil)
	_ sandbox.UnlabelledCounter = (*Backend)(nil)
	_ sandbox.ExpiryRecorder    = (*Backend)(nil)
)

// Option configures a Backend.
type Option func(*Backend)

// WithAgentBinary names the sandbox-agent binary; it is required.
func WithAgentBinary(path string) Option { return func(b *Backend) { b.agentPath = path } }

// WithDeployment is the deployment the backend works for (default
// sandbox.DefaultDeploymentName). Two deployments with one data dir share
// its folder; each sees only its own sandboxes in it.
func WithDeployment(d sandbox.Deployment) Option { return func(b *Backend) { b.dep = d } }

// WithLogger sets the logger (agent stderr goes there).
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// New returns a Backend keeping its sandboxes under dataDir/sandboxes.
func New(dataDir string, opts ...Option) (*Backend, error) {
	b := &Backend{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(b)
	}
	b.dep = b.dep.OrDefault()
	if err := sandbox.ValidateDeployment(b.dep.Name); err != nil {
		return nil, err
	}
	if b.agentPath == "" {
		return nil, errdefs.InvalidArgument("the host backend needs the sandbox-agent binary; build it with `make build` and pass its path")
	}
	if st, err := os.Stat(b.agentPath); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, errdefs.FailedPrecondition("the sandbox-agent binary %s is missing or not executable; build it with `make build`", b.agentPath)
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, errdefs.InvalidArgument("data dir %q: %v", dataDir, err)
	}
	b.root = filepath.Join(abs, "sandboxes")
	if err := os.MkdirAll(b.root, 0o700); err != nil {
		return nil, errdefs.FailedPrecondition("cannot create %s: %v; check the data dir's permissions", b.root, err)
	}
	b.log.Warn("host backend: sandboxes are folders with no isolation; use it on a laptop, never for tenants", "dir", b.root)
	return b, nil
}

// Name is "host".
func (b *Backend) Name() string { return "host" }

// Deployment is the deployment the backend works for.
func (b *Backend) Deployment() sandbox.Deployment { return b.dep }

// meta is meta.json: the host backend's labels and where things are.
type meta struct {
	ID            string            `json:"id"`
	Labels        map[string]string `json:"labels"`
	Image         string            `json:"image,omitempty"` // recorded, not used
	Workspace     string            `json:"workspace"`
	HostWorkspace bool              `json:"host_workspace,omitempty"` // Workspace is the caller's: never delete it
	Socket        string            `json:"socket"`
	SocketDir     string            `json:"socket_dir,omitempty"` // a short dir outside the folder, when the folder's path is too long for a socket
	Env           map[string]string `json:"env,omitempty"`
}

// Create makes the folder and its meta.json; the agent starts on the first attach.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	id := newID()
	dir := filepath.Join(b.root, id)
	m := meta{
		ID: id,
		Labels: map[string]string{
			sandbox.LabelManaged:      "true",
			sandbox.LabelTenant:       spec.Tenant,
			sandbox.LabelConversation: spec.Conversation,
			sandbox.LabelCreatedAt:    time.Now().UTC().Format(time.RFC3339Nano),
			sandbox.LabelDeployment:   b.dep.Name,
		},
		Image:     spec.Image,
		Workspace: filepath.Join(dir, "workspace"),
		Socket:    filepath.Join(dir, "agent.sock"),
		Env:       maps.Clone(spec.Env),
	}
	if spec.HostWorkspace != "" {
		st, err := os.Stat(spec.HostWorkspace)
		if err != nil || !st.IsDir() {
			return sandbox.Info{}, errdefs.InvalidArgument("workspace host path %s is not a directory; create it or name another", spec.HostWorkspace)
		}
		m.Workspace, m.HostWorkspace = filepath.Clean(spec.HostWorkspace), true
	}
	maps.Copy(m.Labels, sandbox.ExpiryLabels(spec))
	maps.Copy(m.Labels, sandbox.ExtLabelsOf(spec))
	if len(m.Socket) > maxSocketPath {
		m.SocketDir = filepath.Join(os.TempDir(), "sandboxd-"+id)
		m.Socket = filepath.Join(m.SocketDir, "agent.sock")
	}
	if spec.Network == sandbox.NetworkProxy {
		return sandbox.Info{}, errdefs.InvalidArgument("the host backend cannot take a sandbox off the network (it shares this machine's), so network \"proxy\" would be a policy nothing enforces; use the docker, containerd or kubernetes backend for it")
	}
	if spec.Network != "" && spec.Network != "none" || spec.Resources != (sandbox.Resources{}) {
		b.log.Info("host backend ignores network and resource settings: the sandbox shares this machine's", "id", id,
			"network", spec.Network, "cpus", spec.Resources.CPUs, "memory_mb", spec.Resources.MemoryMB, "pids", spec.Resources.Pids)
	}

	if err := os.Mkdir(dir, 0o700); err != nil {
		return sandbox.Info{}, errdefs.Internal("cannot create sandbox folder %s: %v", dir, err)
	}
	err := func() error {
		if !m.HostWorkspace {
			if err := os.Mkdir(m.Workspace, 0o755); err != nil {
				return err
			}
		}
		if m.SocketDir != "" {
			if err := os.Mkdir(m.SocketDir, 0o700); err != nil {
				return err
			}
		}
		return writeMeta(dir, m)
	}()
	if err != nil {
		_ = os.RemoveAll(dir)
		if m.SocketDir != "" {
			_ = os.RemoveAll(m.SocketDir)
		}
		return sandbox.Info{}, errdefs.Internal("cannot prepare sandbox folder %s: %v", dir, err)
	}
	return b.info(m), nil
}

// List reads every folder's meta.json and returns the deployment's; a
// folder without a readable one is skipped with a log line.
func (b *Backend) List(ctx context.Context) ([]sandbox.Info, error) {
	ents, err := os.ReadDir(b.root)
	if err != nil {
		return nil, errdefs.Unavailable("cannot read %s: %v", b.root, err)
	}
	var out []sandbox.Info
	for _, e := range ents {
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		m, err := b.load(e.Name())
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // another deployment's, or removed meanwhile
		}
		if err != nil {
			b.log.Warn("skipping a sandbox folder without a readable meta.json", "dir", filepath.Join(b.root, e.Name()), "err", err)
			continue
		}
		out = append(out, b.info(m))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Unlabelled counts the folders whose meta.json has no deployment label.
func (b *Backend) Unlabelled(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(b.root)
	if err != nil {
		return 0, errdefs.Unavailable("cannot read %s: %v", b.root, err)
	}
	n := 0
	for _, e := range ents {
		var m meta
		data, err := os.ReadFile(filepath.Join(b.root, e.Name(), "meta.json"))
		if err == nil && json.Unmarshal(data, &m) == nil && m.Labels[sandbox.LabelManaged] == "true" && m.Labels[sandbox.LabelDeployment] == "" {
			n++
		}
	}
	return n, nil
}

// Inspect returns sandbox id; it is running as long as its folder exists
// (the agent itself starts on demand).
func (b *Backend) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	m, err := b.load(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	return b.info(m), nil
}

func (b *Backend) info(m meta) sandbox.Info {
	created, _ := time.Parse(time.RFC3339Nano, m.Labels[sandbox.LabelCreatedAt])
	return sandbox.Info{
		ID:           m.ID,
		Tenant:       m.Labels[sandbox.LabelTenant],
		Conversation: m.Labels[sandbox.LabelConversation],
		Deployment:   m.Labels[sandbox.LabelDeployment],
		Backend:      "host",
		Image:        m.Image,
		State:        sandbox.StateRunning,
		CreatedAt:    created,
		Workspace:    m.Workspace,
		Labels:       maps.Clone(m.Labels),
	}
}

// load reads id's meta.json; a missing folder, or another deployment's,
// is NotFound.
func (b *Backend) load(id string) (meta, error) {
	if !validID(id) {
		return meta{}, errdefs.NotFound("sandbox %q does not exist on this host", id)
	}
	data, err := os.ReadFile(filepath.Join(b.root, id, "meta.json"))
	if os.IsNotExist(err) {
		return meta{}, errdefs.NotFound("sandbox %s does not exist on this host", id)
	}
	if err != nil {
		return meta{}, errdefs.Internal("cannot read the meta.json of sandbox %s: %v", id, err)
	}
	var m meta
	if err := json.Unmarshal(data, &m); err != nil || m.ID != id || m.Labels[sandbox.LabelManaged] != "true" {
		return meta{}, errdefs.Internal("the meta.json of sandbox %s is damaged (%v); remove the folder %s", id, err, filepath.Join(b.root, id))
	}
	if !b.dep.Owns(m.Labels) {
		return meta{}, errdefs.NotFound("sandbox %s does not exist on this host", id)
	}
	return m, nil
}

// writeMeta writes meta.json atomically, so a crash never leaves half of it.
func writeMeta(dir string, m meta) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".meta.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "meta.json")); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	return nil
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// RecordExpiry keeps sandbox id's expiry label in its meta.json.
func (b *Backend) RecordExpiry(ctx context.Context, id, value string) error {
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	m, err := b.load(id)
	if err != nil {
		return err
	}
	m.Labels[sandbox.LabelExpiry] = value
	if err := writeMeta(filepath.Join(b.root, id), m); err != nil {
		return errdefs.Internal("cannot write the meta.json of sandbox %s: %v", id, err)
	}
	return nil
}
