package engine

import (
	"slices"
	"strings"
)

// candidate is one rung's reading of a fragment, with how much of the
// parse had to be forgiven (0: nothing; 1: a lone metavariable adopted
// into an error; 2: tokens the parser made up).
type candidate struct {
	p    *Pattern
	tier int
}

// choose picks the readings a pattern searches with, from the rungs that
// parse the fragment:
//
//   - one whose flaws are tokens the parser made up counts only where no
//     rung parses the fragment as written;
//   - readings that make the same tree are one;
//   - a reading in which a metavariable is part of a longer token, not a
//     node, is dropped where another holds every metavariable as a node
//     (`#define $N $V` read with the rung's `;` takes `$V;` as its text);
//   - a reading that lexes fewer of the fragment's words as keywords than
//     another is dropped: `rescue $E => $V` is a rescue clause, not a call
//     of a method named rescue, and `if ($C) { $$$ }` in C++ is an if
//     statement, not a member of type `if`;
//   - then a reading that parsed only because a lone metavariable was
//     adopted into an error is dropped where one needed no adoption
//     (`readonly $P: $_` is a labeled statement only so);
//   - a reading from the expression rung that is the same tree as one
//     from a statement rung but for its root is dropped: `function $F()
//     {}` is the declaration, as ast-grep reads it;
//   - a labeled statement is dropped where another rung reads the label
//     and what follows as one node (`$K: $V` is an object's property);
//   - a local variable declared private, protected, public or static,
//     which no method body holds, is dropped where a member rung reads a
//     field.
//
// What is left is searched with, each reading's matches united.
func choose(found []candidate) []*Pattern {
	if len(found) == 0 {
		return nil
	}
	best := found[0].tier
	for _, c := range found {
		best = min(best, c.tier)
	}
	var cs []candidate
	var sigs []string
	for _, c := range found {
		if c.tier == 2 && best < 2 {
			continue
		}
		sig := c.p.signature(true)
		if slices.Contains(sigs, sig) {
			continue
		}
		sigs = append(sigs, sig)
		cs = append(cs, c)
	}
	if whole := slices.DeleteFunc(slices.Clone(cs), func(c candidate) bool { return swallowsMeta(c.p, nil) }); len(whole) > 0 {
		cs = whole
	}
	most := 0
	for _, c := range cs {
		most = max(most, c.p.keywords())
	}
	cs = slices.DeleteFunc(cs, func(c candidate) bool { return c.p.keywords() < most })
	least := cs[0].tier
	for _, c := range cs {
		least = min(least, c.tier)
	}
	cs = slices.DeleteFunc(cs, func(c candidate) bool { return c.tier > least })
	ps := make([]*Pattern, len(cs))
	for i, c := range cs {
		ps[i] = c.p
	}
	for _, weak := range []func(p *Pattern, all []*Pattern) bool{expressionTwin, isLabel, isModifiedLocal} {
		strong := slices.DeleteFunc(slices.Clone(ps), func(p *Pattern) bool { return weak(p, ps) })
		if len(strong) > 0 {
			ps = strong
		}
	}
	return ps
}

// swallowsMeta: a metavariable of the fragment is not a node of the
// reading but part of a longer token.
func swallowsMeta(p *Pattern, _ []*Pattern) bool {
	seen := map[metaVar]bool{}
	for _, v := range p.meta {
		seen[v] = true
	}
	return len(seen) < p.spellings
}

func expressionTwin(p *Pattern, all []*Pattern) bool {
	if p.Context != "expression" {
		return false
	}
	for _, q := range all {
		if q.Context == "statement" && q.signature(false) == p.signature(false) {
			return true
		}
	}
	return false
}

func isLabel(p *Pattern, _ []*Pattern) bool { return p.kind(p.root) == "labeled_statement" }

// kind names a node of the pattern's tree.
func (p *Pattern) kind(i int32) string { return p.Lang.ts.NodeKindForId(p.tree.nodes[i].kind) }

func isModifiedLocal(p *Pattern, _ []*Pattern) bool {
	if p.kind(p.root) != "local_variable_declaration" {
		return false
	}
	for _, c := range p.kids[p.root] {
		if p.kind(c) != "modifiers" {
			continue
		}
		for _, m := range p.kids[c] {
			switch p.kind(m) {
			case "private", "protected", "public", "static":
				return true
			}
		}
	}
	return false
}

// keywords counts the pattern's leaves that the grammar lexed as keywords:
// unnamed tokens spelled like words.
func (p *Pattern) keywords() int {
	n := 0
	p.walk(func(i int32) {
		if len(p.kids[i]) == 0 && !p.tree.nodes[i].named() && word(p.tree.text(i)) {
			n++
		}
	})
	return n
}

// signature spells the pattern's tree (kinds, leaf text, metavariables),
// so two rungs that read the fragment alike count once; without root, the
// root's kind is left out.
func (p *Pattern) signature(root bool) string {
	var b strings.Builder
	var rec func(i int32)
	rec = func(i int32) {
		if i != p.root || root {
			b.WriteString(p.kind(i))
		}
		if v, ok := p.meta[i]; ok {
			b.WriteString("$" + v.name)
			return
		}
		if len(p.kids[i]) == 0 {
			b.WriteString("=" + string(p.tree.text(i)))
			return
		}
		b.WriteByte('(')
		for _, c := range p.kids[i] {
			rec(c)
			b.WriteByte(' ')
		}
		b.WriteByte(')')
	}
	rec(p.root)
	return b.String()
}

// walk visits the pattern's nodes from its root, metavariables as leaves.
func (p *Pattern) walk(f func(i int32)) {
	var rec func(i int32)
	rec = func(i int32) {
		f(i)
		if _, ok := p.meta[i]; ok {
			return
		}
		for _, c := range p.kids[i] {
			rec(c)
		}
	}
	rec(p.root)
}

// Readings lists the contexts of the readings a pattern searches with, in
// ladder order ("statement", "class member", ...).
func (p *Pattern) Readings() []string {
	out := []string{p.Context}
	for _, a := range p.alts {
		out = append(out, a.Context)
	}
	return out
}
