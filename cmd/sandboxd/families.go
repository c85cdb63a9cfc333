package main

import (
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/ports"
	"github.com/sandboxd/sandboxd/tools/askuser"
	"github.com/sandboxd/sandboxd/tools/callrec"
	"github.com/sandboxd/sandboxd/tools/debug"
	"github.com/sandboxd/sandboxd/tools/eval"
	"github.com/sandboxd/sandboxd/tools/family"
	"github.com/sandboxd/sandboxd/tools/files"
	"github.com/sandboxd/sandboxd/tools/lsp"
	"github.com/sandboxd/sandboxd/tools/vibe"
)

// families lists every tool family this build ships, in the order they
// register (and, reversed, close). The audit record comes first, so it
// closes last, after every request's record is in; the call log next so
// that it observes every call; the question port before the families whose calls
// its approval gate stands in front of. The egress gateway serves no tools
// but a sandbox's network, and ports its ports and preview links, in the
// same shape. A new family is one more line.
func families(tokens *api.RunTokens) []family.Family {
	return []family.Family{
		audit.Family(),
		callrec.Family(),
		files.Family(),
		debug.Family(),
		lsp.Family(),
		askuser.Family(),
		eval.Family(),
		vibe.Family(tokens, api.BaseURL),
		structuralSearch(),
		gateway.Family(),
		ports.Family(),
	}
}
