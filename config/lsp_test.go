package config

import (
	"strings"
	"testing"
)

func TestLSPConfig(t *testing.T) {
	c, err := Parse([]byte(`
lsp:
  diagnostics_wait: 5s
  servers:
    - language: zig
      command: [zls]
      extensions: [".zig"]
      root_markers: [build.zig]
`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.LSP.On() || c.LSP.DiagnosticsWait.D().Seconds() != 5 || len(c.LSP.Servers) != 1 || c.LSP.Servers[0].Command[0] != "zls" {
		t.Errorf("parsed %+v", c.LSP)
	}
	if err := c.LSP.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	off, err := Parse([]byte("lsp:\n  enabled: false\n"))
	if err != nil || off.LSP.On() {
		t.Errorf("enabled: false gives On()=%v, %v", off.LSP.On(), err)
	}
	if Default().LSP.On() != true {
		t.Errorf("supervision is off by default")
	}
	for yaml, want := range map[string]string{
		"lsp:\n  servers:\n    - language: zig\n      extensions: ['.zig']\n      root_markers: [build.zig]\n":                    "lsp.servers[0].command: is empty",
		"lsp:\n  servers:\n    - language: zig\n      command: [zls]\n      extensions: [zig]\n      root_markers: [build.zig]\n": `lsp.servers[0].extensions: "zig" does not start with a dot`,
		"lsp:\n  servers:\n    - language: zig\n      command: [zls]\n      extensions: ['.zig']\n":                               "lsp.servers[0].root_markers: is empty",
	} {
		c, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if err := c.LSP.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: Check = %v, want %q", yaml, err, want)
		}
	}
	if _, err := Parse([]byte("lsp:\n  servres: []\n")); err == nil {
		t.Errorf("an unknown lsp key was accepted")
	}
}
