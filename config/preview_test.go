package config

import (
	"strings"
	"testing"
	"time"
)

func TestPreviewSection(t *testing.T) {
	cfg, err := Parse([]byte("preview:\n  domain: preview.example.com\n  default_ttl: 30m\n  max_ttl: 2h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Preview.Check(); err != nil {
		t.Fatal(err)
	}
	if def, max := cfg.Preview.TTLs(); def != 30*time.Minute || max != 2*time.Hour || cfg.Preview.Domain != "preview.example.com" {
		t.Fatalf("got %+v (ttls %v %v)", cfg.Preview, def, max)
	}
	if def, max := (Preview{}).TTLs(); def != time.Hour || max != 24*time.Hour {
		t.Fatalf("defaults: %v %v; want 1h and 24h", def, max)
	}
	if def, max := (Preview{MaxTTL: Duration(10 * time.Minute)}).TTLs(); def != 10*time.Minute || max != 10*time.Minute {
		t.Fatalf("a max below the default default: %v %v; want both 10m", def, max)
	}
	for in, want := range map[string]string{
		"preview:\n  domain: https://p.example.com\n":    "not a bare domain",
		"preview:\n  domain: .example.com\n":             "no leading or trailing dot",
		"preview:\n  domain: Preview.Example.com\n":      "upper-case",
		"preview:\n  default_ttl: 3h\n  max_ttl: 1h\n":   "longer than max_ttl",
		"preview:\n  max_ttl: -1h\n":                     "positive durations",
		"preview:\n  domain: p.example.com\n  ttl: 1h\n": "ttl",
	} {
		cfg, err := Parse([]byte(in))
		if err == nil {
			err = cfg.Preview.Check()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v; want an error saying %q", in, err, want)
		}
	}
}
