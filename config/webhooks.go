package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/webhooks"
)

// Webhook is one URL that gets a tenant's lifecycle events, POSTed as JSON
// and signed with Secret (docs/DESIGN.md, Webhooks).
type Webhook struct {
	URL string `yaml:"url"`
	// Events are the event types sent; empty: every type.
	Events []string `yaml:"events"`
	// Secret keys the HMAC-SHA256 signature of every delivery.
	Secret string `yaml:"secret"`
	// MaxAge is how long an event is retried after it happened; 0: the
	// deployment's webhooks_max_age.
	MaxAge Duration `yaml:"max_age"`
}

// WebhookEndpoints are every configured webhook with its tenant: the
// tenants' own, or with no tenants the top-level webhooks under the admin
// token's tenant name admin.
func (c *Config) WebhookEndpoints(admin string) []webhooks.Endpoint {
	var out []webhooks.Endpoint
	add := func(tenant string, hooks []Webhook) {
		for _, h := range hooks {
			out = append(out, webhooks.Endpoint{Tenant: tenant, URL: h.URL, Events: h.Events, Secret: h.Secret, MaxAge: h.MaxAge.D()})
		}
	}
	if len(c.Tenants) == 0 {
		add(admin, c.Webhooks)
	}
	for _, t := range c.Tenants {
		add(t.Name, t.Webhooks)
	}
	return out
}

// checkWebhooks checks every webhook: an http or https URL, known event
// types, a secret.
func (c *Config) checkWebhooks() error {
	if c.WebhooksMaxAge < 0 {
		return fmt.Errorf("webhooks_max_age: is negative; use a positive duration such as \"1h\", or leave it out for 1h")
	}
	if len(c.Tenants) > 0 && len(c.Webhooks) > 0 {
		return fmt.Errorf("webhooks: the top-level list is for the admin token when no tenants are configured; move each webhook to its tenant's tenants[].webhooks")
	}
	if err := checkWebhookList("webhooks", c.Webhooks); err != nil {
		return err
	}
	for i, t := range c.Tenants {
		if err := checkWebhookList(fmt.Sprintf("tenants[%d].webhooks", i), t.Webhooks); err != nil {
			return err
		}
	}
	return nil
}

func checkWebhookList(key string, hooks []Webhook) error {
	for i, h := range hooks {
		at := fmt.Sprintf("%s[%d]", key, i)
		u, err := url.Parse(h.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.url: %q is not an http or https URL; write it in full, such as https://hooks.example.com/sandboxd", at, h.URL)
		}
		if strings.TrimSpace(h.Secret) == "" {
			return fmt.Errorf("%s.secret: is empty; give a random secret (for example: openssl rand -hex 32), the receiver checks signatures with it", at)
		}
		for j, e := range h.Events {
			if !slices.Contains(webhooks.Types, e) {
				return fmt.Errorf("%s.events[%d]: %q is not an event type; use one of %s, or leave events out for all", at, j, e, strings.Join(webhooks.Types, ", "))
			}
		}
		if h.MaxAge < 0 {
			return fmt.Errorf("%s.max_age: is negative; use a positive duration such as \"30m\", or leave it out for webhooks_max_age", at)
		}
	}
	return nil
}
