package lsp

import (
	"encoding/json"
	"fmt"
	"strings"
)

// rootHint is how to make one of the language's root markers.
func rootHint(lang *Language) string {
	if lang.RootHint != "" {
		return lang.RootHint
	}
	return "create one of them at the project's top"
}

// missingBinary says which of the language's binaries were looked for and,
// where an SDK provides them, that the SDK is what is missing.
func missingBinary(lang *Language, names []string) string {
	out := fmt.Sprintf("binary %s not found on the sandbox's PATH", strings.Join(quoteAll(names), " or "))
	if lang.SDK != "" {
		out += ": " + lang.SDK + " is not installed in the sandbox"
	}
	return out
}

// maxVersion bounds the version status shows for a server.
const maxVersion = 60

// serverLabel is a server's name and version as status shows them. gopls
// sends its whole build information as the version (a JSON object of some
// kilobytes: modules, settings, checksums); only its version is kept.
func serverLabel(name, version string) string {
	version = strings.TrimSpace(version)
	if strings.HasPrefix(version, "{") {
		var bi struct {
			Version string
			Main    struct{ Version string }
		}
		_ = json.Unmarshal([]byte(version), &bi)
		version = bi.Version
		if version == "" {
			version = bi.Main.Version
		}
	}
	if len(version) > maxVersion {
		version = version[:maxVersion] + "..."
	}
	return strings.TrimSpace(name + " " + version)
}
