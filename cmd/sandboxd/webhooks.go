package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/events"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/webhooks"
)

// webhookCloseTimeout bounds the dispatcher's shutdown: the attempt in
// flight is cancelled, so this is only the workers noticing.
const webhookCloseTimeout = 5 * time.Second

// startWebhooks registers the deliveries' series (at zero, also with no
// webhook configured) and starts the dispatcher; nil when no webhook is
// configured, whose Emit does nothing.
func startWebhooks(cfg *config.Config, dataDir string, reg prometheus.Registerer, log *slog.Logger) (*webhooks.Dispatcher, error) {
	m := webhooks.NewMetrics()
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	eps := cfg.WebhookEndpoints(api.AdminTenantName)
	if len(eps) == 0 {
		return nil, nil
	}
	log.Info("webhooks configured", "endpoints", len(eps))
	return webhooks.New(eps, webhooks.Options{MaxAge: cfg.WebhooksMaxAge.D(), Metrics: m, Log: log,
		JournalDir: filepath.Join(dataDir, "webhooks")}), nil
}

// closeWebhooks stops the dispatcher; what is not delivered yet stays in
// its journal in DATA_DIR/webhooks for the next start.
func closeWebhooks(d *webhooks.Dispatcher, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), webhookCloseTimeout)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		log.Warn("webhooks did not stop cleanly", "err", err)
	}
}

// sandboxEvents turns the manager's lifecycle changes into events.
type sandboxEvents struct{ bus *events.Bus }

var _ sandbox.LifecycleObserver = sandboxEvents{}

func (s sandboxEvents) SandboxChanged(info sandbox.Info, change string) {
	s.bus.Emit(events.Event{Type: "sandbox." + change, Tenant: info.Tenant, Sandbox: info.ID, Conversation: info.Conversation})
}

func runCreatedEvent(bus *events.Bus) func(tools.Run) {
	return func(r tools.Run) {
		bus.Emit(events.Event{Type: events.RunCreated, Tenant: r.Tenant, Conversation: r.Conversation, Run: r.ID})
	}
}

func runEndedEvent(bus *events.Bus) func(tools.Run, string) {
	return func(r tools.Run, reason string) {
		bus.Emit(events.Event{Type: events.RunEnded, Tenant: r.Tenant, Conversation: r.Conversation, Run: r.ID, Reason: reason})
	}
}
