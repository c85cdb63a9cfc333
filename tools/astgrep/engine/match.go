package engine

import (
	"bytes"
	"sort"
)

// Capture is what one metavariable bound in a match.
type Capture struct {
	Name       string
	Text       string // source text: one node, or the whole run for $$$
	Start, End uint32 // byte span in the file (empty run: Start == End)
	Multi      bool
}

// Match is one place a pattern matched.
type Match struct {
	Start, End uint32 // byte span of the matched node
	Line       int    // 1-based line of Start
	EndLine    int    // 1-based line of End
	Text       string // the matched source text
	Captures   []Capture
}

// binding is one metavariable bound during a match attempt.
type binding struct {
	name        string
	first, last int32 // node span; first < 0 for an empty run
	multi       bool
	at          uint32 // where an empty run sits
}

// matcher matches one pattern against one tree. Bindings form a stack so a
// failed branch is undone by truncation.
type matcher struct {
	p   *Pattern
	t   *Tree
	env []binding
}

// FindAll returns every match of p in t in document order, nested matches
// included (as ast-grep reports them). With more than one reading of the
// fragment, a node any reading matches is a match, reported once.
func (p *Pattern) FindAll(t *Tree) []Match {
	out := p.findAll(t)
	if len(p.alts) == 0 {
		return out
	}
	type span struct{ s, e uint32 }
	seen := map[span]bool{}
	for _, m := range out {
		seen[span{m.Start, m.End}] = true
	}
	grew := false
	for _, a := range p.alts {
		for _, m := range a.findAll(t) {
			if k := (span{m.Start, m.End}); !seen[k] {
				seen[k] = true
				out = append(out, m)
				grew = true
			}
		}
	}
	if grew {
		// Document order: by start, the outer of two nodes first.
		sort.SliceStable(out, func(a, b int) bool {
			if out[a].Start != out[b].Start {
				return out[a].Start < out[b].Start
			}
			return out[a].End > out[b].End
		})
	}
	return out
}

func (p *Pattern) findAll(t *Tree) []Match {
	m := &matcher{p: p, t: t}
	pr := &p.tree.nodes[p.root]
	_, rootMeta := p.meta[p.root]
	var out []Match
	for i := range t.nodes {
		n := &t.nodes[i]
		// A node the parser made up is no match of its own (`$X` would
		// report empty matches in broken code), only a part of one.
		if n.extra() || n.flags&flagMissing != 0 || (!rootMeta && n.kind != pr.kind) {
			continue
		}
		m.env = m.env[:0]
		if m.node(p.root, int32(i)) == matched {
			out = append(out, m.result(int32(i)))
		}
	}
	return out
}

func (m *matcher) result(i int32) Match {
	n := &m.t.nodes[i]
	end := m.p.trimAbsorbed(m.t, i)
	r := Match{Start: n.start, End: end, Line: m.t.line(n.start), EndLine: m.t.line(end), Text: string(m.t.Src[n.start:end])}
	for _, b := range m.env {
		if b.name == "" || b.name[0] == '_' {
			continue
		}
		c := Capture{Name: b.name, Multi: b.multi}
		if b.first < 0 {
			c.Start, c.End = b.at, b.at
		} else {
			c.Start, c.End = m.t.nodes[b.first].start, m.t.nodes[b.last].end
			c.Text = string(m.t.Src[c.Start:c.End])
		}
		r.Captures = append(r.Captures, c)
	}
	return r
}

// outcome of matching one pattern node against one target node.
type outcome int

const (
	noMatch  outcome = iota
	matched          // both consumed
	skipCand         // the target node is punctuation the pattern may pass over
)

// node matches pattern node pi against target node ti.
func (m *matcher) node(pi, ti int32) outcome {
	pn, tn := &m.p.tree.nodes[pi], &m.t.nodes[ti]
	if v, ok := m.p.meta[pi]; ok {
		// A one-node metavariable stands for a named node.
		if v.multi || !tn.named() || !m.bind(v, ti, ti, tn.start) {
			return noMatch
		}
		return matched
	}
	kids := m.p.kids[pi]
	if len(kids) == 0 {
		// A leaf: punctuation and keywords match by kind, named leaves
		// by kind and text.
		if pn.kind == tn.kind && (!pn.named() || bytes.Equal(m.p.tree.text(pi), m.t.text(ti))) {
			return matched
		}
		if !tn.named() {
			return skipCand
		}
		return noMatch
	}
	if pn.kind != tn.kind {
		return noMatch
	}
	mark := len(m.env)
	if m.seq(kids, tn.first, m.nextT(tn.first)) {
		return matched
	}
	m.env = m.env[:mark]
	return noMatch
}

// nextT skips comments and other extras in a target sibling list.
func (m *matcher) nextT(i int32) int32 {
	for i >= 0 && m.t.nodes[i].extra() {
		i = m.t.nodes[i].next
	}
	return i
}

func (m *matcher) sib(i int32) int32 { return m.nextT(m.t.nodes[i].next) }

// multi reports whether pattern node pi is a $$$ run.
func (m *matcher) multi(pi int32) (metaVar, bool) {
	v, ok := m.p.meta[pi]
	return v, ok && v.multi
}

// trivial reports a pattern leaf that is punctuation or a keyword.
func (m *matcher) trivial(pi int32) bool {
	_, isMeta := m.p.meta[pi]
	return !isMeta && len(m.p.kids[pi]) == 0 && !m.p.tree.nodes[pi].named()
}

// seq matches the pattern children gs against the target siblings from tc,
// the way ast-grep's default ("smart") strictness does: every pattern node
// must match in order; unnamed target nodes may be passed over; target
// nodes after the last pattern node are allowed; $$$ takes target nodes
// until the next pattern node matches (no backtracking).
func (m *matcher) seq(gs []int32, first, tc int32) bool {
	if tc < 0 {
		return false
	}
	g := 0
	for {
		if v, ok := m.multi(gs[g]); ok {
			g++
			at := m.posAt(tc)
			from := g
			for g < len(gs) && m.trivial(gs[g]) {
				g++
			}
			skipped := gs[from:g]
			var run []int32
			if g == len(gs) {
				for c := tc; c >= 0; c = m.sib(c) {
					run = append(run, c)
				}
				return m.bindRun(v, first, run, skipped, at)
			}
			if _, ok := m.multi(gs[g]); ok {
				// $$$A $$$B: the first takes exactly one node.
				if tc < 0 || !m.bindRun(v, first, []int32{tc}, skipped, at) {
					return false
				}
				if tc = m.sib(tc); tc < 0 {
					return false
				}
				continue
			}
			for {
				if tc < 0 {
					return false
				}
				mark := len(m.env)
				o := m.node(gs[g], tc)
				m.env = m.env[:mark]
				if o == matched {
					break
				}
				run = append(run, tc)
				tc = m.sib(tc)
			}
			if !m.bindRun(v, first, run, skipped, at) {
				return false
			}
		}
		for {
			if tc < 0 {
				// Only runs may be left over.
				for ; g < len(gs); g++ {
					if _, ok := m.multi(gs[g]); !ok {
						return false
					}
				}
				return true
			}
			o := m.node(gs[g], tc)
			if o == matched {
				break
			}
			if o == noMatch {
				return false
			}
			tc = m.sib(tc)
		}
		g++
		tc = m.sib(tc)
		if g == len(gs) {
			return true
		}
		if tc < 0 {
			// Nothing left for the remaining pattern nodes, unless they
			// are all runs.
			for ; g < len(gs); g++ {
				if _, ok := m.multi(gs[g]); !ok {
					return false
				}
			}
			return true
		}
	}
}

// posAt is the byte offset where an empty run before node i sits.
func (m *matcher) posAt(i int32) uint32 {
	if i < 0 {
		return 0
	}
	return m.t.nodes[i].start
}

// bindRun binds a $$$ run, leaving out the punctuation at its end that the
// pattern's own punctuation after the run (skipped) stands for: the
// run's last nodes that are, from the end, of the kinds of those pattern
// nodes (`do $$$B; done` against a body without `;` keeps its last
// command).
// Comments right before the run's first node and right after its last are
// part of the run (first is the raw first sibling of the list): a rewrite
// of `{ $$$BODY }` keeps the comment that opens or closes the body, as
// ast-grep does.
func (m *matcher) bindRun(v metaVar, first int32, run []int32, skipped []int32, at uint32) bool {
	j := len(run) - 1
	for k := len(skipped) - 1; k >= 0 && j >= 0; k-- {
		if m.t.nodes[run[j]].kind == m.p.tree.nodes[skipped[k]].kind {
			j--
		}
	}
	run = run[:j+1]
	if len(run) == 0 {
		return m.bind(v, -1, -1, at)
	}
	lo, hi := run[0], run[len(run)-1]
	lead := int32(-1)
	for i := first; i >= 0 && i != run[0]; i = m.t.nodes[i].next {
		switch n := &m.t.nodes[i]; {
		case !n.extra():
			lead = -1
		case lead < 0 && n.start < n.end:
			lead = i
		}
	}
	if lead >= 0 {
		lo = lead
	}
	for i := m.t.nodes[hi].next; i >= 0 && m.t.nodes[i].extra(); i = m.t.nodes[i].next {
		if m.t.nodes[i].start < m.t.nodes[i].end {
			hi = i
		}
	}
	return m.bind(v, lo, hi, at)
}

// bind records a metavariable; a name bound before must capture the same
// tokens again (layout and comments ignored).
func (m *matcher) bind(v metaVar, first, last int32, at uint32) bool {
	if v.captures() {
		for _, b := range m.env {
			if b.name == v.name {
				return sameTokens(m.t, b.first, b.last, first, last)
			}
		}
	}
	m.env = append(m.env, binding{name: v.name, first: first, last: last, multi: v.multi, at: at})
	return true
}

// sameTokens compares the leaf tokens of two sibling runs.
func sameTokens(t *Tree, f1, l1, f2, l2 int32) bool {
	a := leaves(t, f1, l1, nil)
	b := leaves(t, f2, l2, nil)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(t.text(a[i]), t.text(b[i])) {
			return false
		}
	}
	return true
}

// leaves appends the non-extra leaves of the sibling run first..last.
func leaves(t *Tree, first, last int32, out []int32) []int32 {
	if first < 0 {
		return out
	}
	var walk func(i int32)
	walk = func(i int32) {
		n := &t.nodes[i]
		if n.extra() {
			return
		}
		if n.first < 0 {
			out = append(out, i)
			return
		}
		for c := n.first; c >= 0; c = t.nodes[c].next {
			walk(c)
		}
	}
	for i := first; i >= 0; i = t.nodes[i].next {
		walk(i)
		if i == last {
			break
		}
	}
	return out
}
