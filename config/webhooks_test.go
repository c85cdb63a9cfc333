package config

import (
	"strings"
	"testing"
	"time"
)

func TestWebhookKeys(t *testing.T) {
	tok := strings.Repeat("a", 64)
	c, err := Parse([]byte("webhooks_max_age: 2h\ntenants:\n  - name: a\n    token_sha256: " + tok + "\n    webhooks:\n" +
		"      - {url: https://h.example/x, secret: k, events: [sandbox.created, run.ended], max_age: 30m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	eps := c.WebhookEndpoints("admin")
	if len(eps) != 1 || eps[0].Tenant != "a" || eps[0].URL != "https://h.example/x" || eps[0].Secret != "k" ||
		len(eps[0].Events) != 2 || eps[0].MaxAge != 30*time.Minute || c.WebhooksMaxAge.D() != 2*time.Hour {
		t.Errorf("endpoints = %+v, max age %v", eps, c.WebhooksMaxAge.D())
	}
	c, err = Parse([]byte("webhooks:\n  - {url: http://127.0.0.1:9/h, secret: k}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if eps := c.WebhookEndpoints("admin"); len(eps) != 1 || eps[0].Tenant != "admin" {
		t.Errorf("top-level webhooks without tenants = %+v, want one of tenant admin", eps)
	}
}

func TestWebhookKeysRefused(t *testing.T) {
	tok := strings.Repeat("a", 64)
	for in, want := range map[string]string{
		"webhooks:\n  - {url: ftp://x/y, secret: k}\n":                                                      `webhooks[0].url: "ftp://x/y" is not an http or https URL`,
		"webhooks:\n  - {url: http://x/y}\n":                                                                `webhooks[0].secret: is empty`,
		"webhooks:\n  - {url: http://x/y, secret: k, events: [sandbox.born]}\n":                             `webhooks[0].events[0]: "sandbox.born" is not an event type`,
		"webhooks:\n  - {url: http://x/y, secret: k, max_age: -1s}\n":                                       `webhooks[0].max_age: is negative`,
		"webhooks_max_age: -1s\n":                                                                           `webhooks_max_age: is negative`,
		"tenants:\n  - {name: a, token_sha256: " + tok + ", webhooks: [{url: x}]}\n":                        `tenants[0].webhooks[0].url`,
		"tenants:\n  - {name: a, token_sha256: " + tok + "}\nwebhooks:\n  - {url: http://x/y, secret: k}\n": `move each webhook to its tenant's tenants[].webhooks`,
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", in, err, want)
		}
	}
}
