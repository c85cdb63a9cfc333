package engine

// trimAbsorbed is where a match of target node i ends as the user sees it:
// without the terminator the pattern's rung absorbed (Context.Absorb) and
// the layout before it. Other patterns end where the node ends.
func (p *Pattern) trimAbsorbed(t *Tree, i int32) uint32 {
	n := &t.nodes[i]
	if len(p.absorbed) == 0 {
		return n.end
	}
	last := int32(-1)
	for j := i; ; {
		k := int32(-1)
		for c := t.nodes[j].first; c >= 0; c = t.nodes[c].next {
			if !t.nodes[c].extra() {
				k = c
			}
		}
		if k < 0 {
			break
		}
		last, j = k, k
	}
	if last < 0 || t.nodes[last].end != n.end || string(t.text(last)) != string(p.absorbed) {
		return n.end
	}
	end := t.nodes[last].start
	for end > n.start && (t.Src[end-1] == ' ' || t.Src[end-1] == '\t' || t.Src[end-1] == '\n' || t.Src[end-1] == '\r') {
		end--
	}
	return end
}
