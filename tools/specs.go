package tools

// Specs lists every registered tool in registration order, whatever its
// condition: the closed set of tool names, for metrics that export every
// tool from start-up. Call it after registration, like Visible.
func (r *Registry) Specs() []Spec {
	out := make([]Spec, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e.spec)
	}
	return out
}
