package config

import (
	"strings"
	"testing"
	"time"
)

func TestDebugSettings(t *testing.T) {
	c, err := Parse([]byte("debug:\n  session_ttl: 90s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Debug.TTL() != 90*time.Second || c.Debug.Disabled {
		t.Fatalf("debug %+v", c.Debug)
	}
	if Default().Debug.TTL() != 30*time.Minute {
		t.Fatalf("default TTL %s", Default().Debug.TTL())
	}
	if _, err := Parse([]byte("debug:\n  session_tll: 5m\n")); err == nil || !strings.Contains(err.Error(), "session_tll") {
		t.Fatalf("a misspelt key: %v", err)
	}
	c, err = Parse([]byte("debug:\n  session_ttl: -5m\n"))
	if err == nil {
		err = c.Debug.Check()
	}
	if err == nil || !strings.Contains(err.Error(), "session_ttl") {
		t.Fatalf("a negative TTL: %v", err)
	}
}
