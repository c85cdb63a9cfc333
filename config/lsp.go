package config

import (
	"fmt"
	"strings"
)

// LSP configures language-server supervision (the lsp and lsp_rename tools
// and diagnostics on write).
type LSP struct {
	// Enabled turns supervision on; absent means on.
	Enabled *bool `yaml:"enabled"`
	// Servers add servers, or replace a built-in one with the same language.
	Servers []LSPServer `yaml:"servers"`
	// StartTimeout caps how long a server may take to become ready (30s).
	StartTimeout Duration `yaml:"start_timeout"`
	// RequestTimeout caps one request to a server (20s).
	RequestTimeout Duration `yaml:"request_timeout"`
	// DiagnosticsWait caps how long a write waits for fresh diagnostics (3s).
	DiagnosticsWait Duration `yaml:"diagnostics_wait"`
}

// LSPServer is one language server: the command inside the sandbox, the
// file extensions it serves and the files that mark a project root.
type LSPServer struct {
	Language    string   `yaml:"language"`     // e.g. "go", "python"
	Command     []string `yaml:"command"`      // argv; the first word is looked up on PATH
	Extensions  []string `yaml:"extensions"`   // e.g. [".go"]
	RootMarkers []string `yaml:"root_markers"` // e.g. ["go.mod"]
	LanguageID  string   `yaml:"language_id"`  // LSP languageId; default: language
}

// On reports whether supervision is enabled.
func (l LSP) On() bool { return l.Enabled == nil || *l.Enabled }

// Check validates the servers; its error names the entry and the fix.
func (l LSP) Check() error {
	for i, s := range l.Servers {
		switch {
		case strings.TrimSpace(s.Language) == "":
			return fmt.Errorf("lsp.servers[%d].language: is empty; name the language, e.g. \"go\"", i)
		case len(s.Command) == 0 || s.Command[0] == "":
			return fmt.Errorf("lsp.servers[%d].command: is empty (language %s); give the server's argv, e.g. [\"gopls\"]", i, s.Language)
		case len(s.Extensions) == 0:
			return fmt.Errorf("lsp.servers[%d].extensions: is empty (language %s); list the file extensions it serves, e.g. [\".go\"]", i, s.Language)
		case len(s.RootMarkers) == 0:
			return fmt.Errorf("lsp.servers[%d].root_markers: is empty (language %s); list the files that mark a project root, e.g. [\"go.mod\"]", i, s.Language)
		}
		for _, e := range s.Extensions {
			if !strings.HasPrefix(e, ".") {
				return fmt.Errorf("lsp.servers[%d].extensions: %q does not start with a dot (language %s); write it like \".go\"", i, e, s.Language)
			}
		}
	}
	for name, d := range map[string]Duration{"start_timeout": l.StartTimeout, "request_timeout": l.RequestTimeout, "diagnostics_wait": l.DiagnosticsWait} {
		if d < 0 {
			return fmt.Errorf("lsp.%s: is negative; give a positive duration such as \"10s\"", name)
		}
	}
	return nil
}
