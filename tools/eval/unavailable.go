package eval

import "github.com/sandboxd/sandboxd/tools"

// Why (tools.Explainer): eval is registered, so a kernel could run in the
// conversation's sandbox, or on the host where that is configured; neither
// is there.
func (t *Tool) Why(env *tools.Env) string {
	if t.Available(env) {
		return ""
	}
	return tools.WhyNoSandboxAnd(env, "kernels on the host are off in this sandboxd's config (eval.host)")
}
