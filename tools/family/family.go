// Package family is the one shape every tool family has inside sandboxd:
// how its config section is checked, how it plugs its tools, hooks and
// services in, what it exports to Prometheus, and what it does when a run
// ends and when the daemon stops. The composition root (cmd/sandboxd) holds
// a list of families and walks it phase by phase; a new family is one more
// entry in that list.
//
// The phases, in the order the root calls them:
//
//  1. Validate, while the config loads: nothing is open yet, so a bad
//     section stops the daemon before the admin token, the engine or any
//     sandbox is touched.
//  2. Register, once the leaves exist (the tool registry, the run store):
//     the family builds its parts and registers tools, env hooks, a gate
//     and the services the HTTP API serves for it.
//  3. Collector, right after Register: its metrics, read at scrape time.
//  4. Start, once the HTTP API exists (the edges): for families that serve
//     requests of their own through the API handler.
//  5. RunEnded, for every run that ends, from any goroutine.
//  6. Drain, when the daemon begins to stop: callers blocked inside the
//     family (a question waiting for a person, a worker being waited for)
//     are released, before the HTTP server waits for its requests.
//  7. Close, after the HTTP server has stopped, in the reverse order of
//     the list.
package family

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/events"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// Family is one tool family's lifecycle. Embed Base for the phases a
// family does not need.
type Family interface {
	// Name is the family's short name, used in logs and error messages.
	Name() string
	// Validate checks the family's section of cfg. Its error names the
	// key and says what to do ("lsp.servers[0].command: is empty; give
	// ..."); config load prefixes the file.
	Validate(cfg *config.Config) error
	// Register builds the family from s.Config and registers its parts
	// through s. A family the config turns off says so with s.Omit.
	Register(s *Setup) error
	// Collector is the family's metrics, read at scrape time; nil when it
	// has none. It is asked for after Register and exports its series
	// (at zero) even when the family is off, so dashboards never miss one.
	Collector() prometheus.Collector
	// Start is called once the HTTP API exists, with its handler.
	Start(ctx context.Context, api http.Handler) error
	// RunEnded drops what the family keeps for run r. It must not block
	// for long: it runs on the goroutine that ended the run.
	RunEnded(r tools.Run)
	// Drain releases callers blocked inside the family. It is called once,
	// when the daemon begins to stop, and must return by ctx's deadline.
	Drain(ctx context.Context)
	// Close releases what the family holds. It is called once, after the
	// HTTP server stopped and after Drain.
	Close() error
}

// Base gives a family the phases it does not need as no-ops.
type Base struct{}

func (Base) Validate(*config.Config) error             { return nil }
func (Base) Collector() prometheus.Collector           { return nil }
func (Base) Start(context.Context, http.Handler) error { return nil }
func (Base) RunEnded(tools.Run)                        {}
func (Base) Drain(context.Context)                     {}
func (Base) Close() error                              { return nil }

// Runs is what a family may ask of the run store.
type Runs interface {
	// List returns the live runs of tenant.
	List(ctx context.Context, tenant string) []tools.Run
	// Create records a new run (a worker's child run) and returns it with
	// its id.
	Create(ctx context.Context, run tools.Run) (tools.Run, error)
}

// Setup is what Register gets: the leaves built before the families and a
// place to leave what the edges need (env hooks, services).
type Setup struct {
	Config      *config.Config
	Log         *slog.Logger
	DataDir     string // the daemon's data directory
	AgentBinary string // the sandbox-agent binary on the host
	Tools       *tools.Registry
	Runs        Runs
	// Annotate sets a label on a sandbox after creation where the backend
	// can (sandbox.Annotator); sandbox.ErrNoAnnotations where it cannot.
	Annotate func(ctx context.Context, info sandbox.Info, key, value string) error
	// Events carries lifecycle events: a family emits its own (questions,
	// previews, egress decisions) and may Add a sink that hears them all
	// (the audit record, the webhooks).
	Events *events.Bus

	envHooks    []EnvHook
	services    []any
	attachHooks []AttachHook
	keepPipes   []func(sandbox.Info) bool
}

// AttachHook runs on every agent pipe the sandbox manager opens, before
// any call uses it; an error fails the pipe (and says why to the call).
type AttachHook func(ctx context.Context, info sandbox.Info, c *agent.Client) error

// AttachHook adds h to the hooks run on every new agent pipe.
func (s *Setup) AttachHook(h AttachHook) { s.attachHooks = append(s.attachHooks, h) }

// AttachHooks returns the hooks families added, in order.
func (s *Setup) AttachHooks() []AttachHook { return s.attachHooks }

// KeepPipe asks for a pipe kept open to every running sandbox keep says
// yes to, with no call needing it (the sandbox's programs use it: network
// mode "proxy"). A replica keeps pipes only to its own conversations.
func (s *Setup) KeepPipe(keep func(sandbox.Info) bool) { s.keepPipes = append(s.keepPipes, keep) }

// KeepPipes returns what families asked to keep, in order.
func (s *Setup) KeepPipes() []func(sandbox.Info) bool { return s.keepPipes }

// EnvHook completes every tools.Env the API builds, before the registry
// sees it (diagnostics on write plug in here). It must not block.
type EnvHook func(ctx context.Context, env *tools.Env)

// Register adds tools to the registry.
func (s *Setup) Register(ts ...tools.Tool) {
	for _, t := range ts {
		s.Tools.Register(t)
	}
}

// Omit tells the registry that the tools named are left out and why, so
// that a run's tool list says it.
func (s *Setup) Omit(why string, names ...string) { s.Tools.Omit(why, names...) }

// EnvHook adds h to the hooks run on every tools.Env.
func (s *Setup) EnvHook(h EnvHook) { s.envHooks = append(s.envHooks, h) }

// Serve hands the HTTP API a service it serves routes for (the question
// port, the call log). The API takes the services it knows by their type
// and refuses any other at start-up.
func (s *Setup) Serve(service any) { s.services = append(s.services, service) }

// EnvHooks returns the hooks families added, in order.
func (s *Setup) EnvHooks() []EnvHook { return s.envHooks }

// Services returns the services families handed the API, in order.
func (s *Setup) Services() []any { return s.services }
