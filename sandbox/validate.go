package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// MaxConversationLen caps a conversation id; it ends up in engine labels.
const MaxConversationLen = 128

// ValidateConversation checks a conversation id: 1 to 128 characters of
// [A-Za-z0-9._:-], starting with a letter or digit.
func ValidateConversation(id string) error {
	ok := id != "" && len(id) <= MaxConversationLen && isAlnum(id[0])
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = isAlnum(c) || c == '.' || c == '_' || c == ':' || c == '-'
	}
	if !ok {
		return errdefs.InvalidArgument("conversation id %s is invalid: use 1 to %d letters, digits, '.', '_', ':' or '-', starting with a letter or digit",
			quoteShort(id), MaxConversationLen)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// quoteShort quotes s for an error message, cut to a readable length.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q (%d bytes)", s[:max]+"...", len(s))
	}
	return fmt.Sprintf("%q", s)
}

// validateSpec checks what every backend relies on.
func validateSpec(spec Spec) error {
	if strings.TrimSpace(spec.Tenant) == "" {
		return errdefs.InvalidArgument("the tenant is empty; every sandbox belongs to a tenant")
	}
	if err := ValidateConversation(spec.Conversation); err != nil {
		return err
	}
	switch spec.Network {
	case "", "none", "bridge":
		if spec.Egress != nil {
			return errdefs.InvalidArgument("egress rules and secrets apply only to network \"proxy\"; set \"network\": \"proxy\" or leave egress and secrets out")
		}
	case NetworkProxy:
	default:
		return errdefs.InvalidArgument("network %s is not supported; use \"none\", \"bridge\" or \"proxy\"", quoteShort(spec.Network))
	}
	if err := ValidateRuntime(spec.Runtime); err != nil {
		return err
	}
	r := spec.Resources
	if r.CPUs < 0 || r.MemoryMB < 0 || r.Pids < 0 {
		return errdefs.InvalidArgument("resources must not be negative (cpus %g, memory_mb %d, pids %d); leave a field at 0 for the default",
			r.CPUs, r.MemoryMB, r.Pids)
	}
	if spec.HostWorkspace != "" && !filepath.IsAbs(spec.HostWorkspace) {
		return errdefs.InvalidArgument("workspace host path %s is not absolute; give the full path of a host directory", quoteShort(spec.HostWorkspace))
	}
	if err := spec.Expiry.check(); err != nil {
		return err
	}
	if err := validLabels(spec); err != nil {
		return err
	}
	for k, v := range spec.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return errdefs.InvalidArgument("environment variable %s is invalid: a name must be non-empty without '=' or NUL, and a value without NUL", quoteShort(k))
		}
	}
	return nil
}
