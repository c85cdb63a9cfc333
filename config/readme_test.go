package config

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEExampleParses keeps the configuration example in README.md
// true: every key in it must exist and every value must validate.
func TestREADMEExampleParses(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Configuration")
	if !ok {
		t.Fatal("README.md has no Configuration section")
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("the Configuration section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	block = strings.ReplaceAll(block, "<hex sha-256 of the token>", strings.Repeat("ab", 32))
	cfg, err := Parse([]byte(block))
	if err != nil {
		t.Fatalf("the README's example config does not parse: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the README's example config does not validate: %v", err)
	}
	if len(cfg.Tenants) != 1 || cfg.Workers.Fast == nil || len(cfg.LSP.Servers) != 1 {
		t.Fatalf("the example lost keys on the way: %+v", cfg)
	}
}
