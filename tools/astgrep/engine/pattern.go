package engine

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// metaRe finds metavariables in a pattern or a rewrite template: $$$NAME
// (a run, possibly empty; the name may be left out), $NAME and $_ (one node).
var metaRe = regexp.MustCompile(`\$\$\$[A-Z0-9_]*|\$[A-Z_][A-Z0-9_]*`)

// metaVar is a metavariable as it sits in a compiled pattern.
type metaVar struct {
	name  string // without the dollars; "" for $$$ alone
	multi bool   // $$$: a run of siblings
}

// captures reports whether the variable binds a value others can refer to.
func (v metaVar) captures() bool { return v.name != "" && !strings.HasPrefix(v.name, "_") }

// Pattern is a compiled structural pattern: the fragment's syntax tree in
// the language of the files it is matched against. A Pattern is immutable
// and safe for concurrent use.
type Pattern struct {
	Lang      *Language
	Source    string // the pattern as given
	Context   string // the rung of the ladder that parsed it
	tree      *Tree
	root      int32
	meta      map[int32]metaVar
	kids      [][]int32   // children of each pattern node, extras left out
	names     []string    // capturing names, in order of first appearance
	tokens    [][]byte    // literal leaves every match contains, rarest guess first
	dotted    [][2][]byte // literal `a.b` member accesses every match contains
	spellings int         // the fragment's distinct metavariable spellings
	// alts are the other readings of the fragment (other rungs that
	// parse it as another kind of node); a match of any is a match.
	alts []*Pattern
	// absorbed is the terminator the rung added and the pattern's node
	// took in (Context.Absorb); matches are reported without it.
	absorbed []byte
}

// key identifies the pattern for the result cache.
func (p *Pattern) key() string { return p.Lang.Name + "\x00" + p.Source }

// Names lists the capturing metavariables in order of first appearance.
func (p *Pattern) Names() []string { return append([]string(nil), p.names...) }

// Compile parses pattern in language l in every context of the language's
// ladder and keeps each reading that parses and holds the fragment as one
// syntax node of a kind that fits it (readings.go says which fit); the
// pattern matches what any kept reading matches. A pattern no context
// accepts is an invalid-argument error that names the language and the
// place the parse failed.
func Compile(ctx context.Context, l *Language, pattern string) (*Pattern, error) {
	frag := strings.TrimSpace(pattern)
	if frag == "" {
		return nil, errdefs.InvalidArgument("the pattern is empty; give a code fragment such as `foo($A)`")
	}
	subst, metas := substitute(frag, l.Placeholder)
	p, err := newParser(l)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var firstFail string
	var tried []string
	var found []candidate
	for _, c := range l.Ladder {
		tried = append(tried, c.Name)
		body := subst
		if c.Indent != "" {
			body = strings.ReplaceAll(body, "\n", "\n"+c.Indent)
		}
		at := strings.Index(c.Template, hole)
		after := c.Template[at+len(hole):]
		src := c.Template[:at] + body + after
		s, e := uint32(at), uint32(at+len(body))
		t, err := p.parse(ctx, []byte(src))
		if err != nil {
			return nil, err
		}
		// A reading with no error at all is best; one whose error was a
		// lone metavariable the grammar could not place (`{ $$$ }` in Java
		// or C: a block to the user, an identifier without `;` to the
		// grammar) is next; last, one whose only flaws are tokens the
		// parser made up (a missing `;` after such a run).
		tier := 0
		if adoptLoneMetas(t, metas) {
			tier = 1
		}
		if _, bad := t.firstFlaw(l, false); bad {
			if off, bad := t.firstFlaw(l, true); bad {
				if firstFail == "" {
					firstFail = failure(src, body, int(s), int(off))
				}
				continue
			}
			tier = 2
		}
		root := outermost(t, s, e)
		var absorbed []byte
		if root < 0 && c.Absorb != "" && strings.HasPrefix(after, c.Absorb) {
			root, absorbed = outermost(t, s, e+uint32(len(c.Absorb))), []byte(c.Absorb)
		}
		semi := int64(-1)
		if root < 0 && strings.HasPrefix(after, ";") {
			// The rung's own `;` ends the node: `unsigned int $F : $W`
			// is a field declaration only with it.
			if root = outermost(t, s, e+1); root >= 0 {
				semi = int64(e)
			}
		}
		if root < 0 {
			root = beforeOwnSemi(t, s, e)
		}
		if root < 0 {
			if firstFail == "" {
				firstFail = "it does not form one syntax node (give a single statement, expression or declaration)"
			}
			continue
		}
		pat := build(l, pattern, c.Name, t, root, metas, semi)
		pat.absorbed = absorbed
		found = append(found, candidate{p: pat, tier: tier})
	}
	if kept := choose(found); len(kept) > 0 {
		first := kept[0]
		first.alts = kept[1:]
		for _, a := range first.alts {
			for _, n := range a.names {
				if !slices.Contains(first.names, n) {
					first.names = append(first.names, n)
				}
			}
		}
		return first, nil
	}
	return nil, errdefs.InvalidArgument("the pattern is unparseable as %s in every context tried (%s): %s; fix the fragment so it is valid %s code, with $NAME where any node may stand",
		l.Name, strings.Join(dedupe(tried), ", "), firstFail, l.Name)
}

// adoptLoneMetas clears the error of an ERROR node that holds exactly one
// metavariable: `{ $$$ }` in Java or C is a block of statements to the
// user, but a bare identifier without `;` to the grammar. It reports
// whether it cleared any.
func adoptLoneMetas(t *Tree, metas map[string]metaVar) bool {
	adopted := false
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.flags&flagError == 0 {
			continue
		}
		if _, ok := metas[string(bytes.TrimSpace(t.text(int32(i))))]; ok {
			n.flags &^= flagError | flagExtra
			adopted = true
		}
	}
	return adopted
}

// substitute replaces the '$' of every metavariable with the language's
// placeholder and returns the placeholder spellings mapped to variables.
func substitute(frag, ph string) (string, map[string]metaVar) {
	metas := map[string]metaVar{}
	out := metaRe.ReplaceAllStringFunc(frag, func(m string) string {
		v := metaVar{}
		if strings.HasPrefix(m, "$$$") {
			v.multi, v.name = true, m[3:]
		} else {
			v.name = m[1:]
		}
		s := strings.ReplaceAll(m, "$", ph)
		metas[s] = v
		return s
	})
	return out, metas
}

// failure describes where the parse of a rung failed, relative to the
// pattern the user wrote.
func failure(src, body string, s, off int) string {
	rel := off - s
	if rel < 0 || rel > len(body) {
		return "the parse failed around the fragment's edges (an unclosed bracket or a missing part?)"
	}
	line := strings.Count(body[:rel], "\n") + 1
	start := strings.LastIndexByte(body[:rel], '\n') + 1
	col := rel - start + 1
	near := body[rel:]
	if i := strings.IndexByte(near, '\n'); i >= 0 {
		near = near[:i]
	}
	if len(near) > 30 {
		near = near[:30]
	}
	if near == "" {
		return fmt.Sprintf("the parse failed at line %d column %d (end of the fragment)", line, col)
	}
	return fmt.Sprintf("the parse failed at line %d column %d near %q", line, col, near)
}

func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// outermost returns the outermost node spanning exactly [s, e), or -1.
func outermost(t *Tree, s, e uint32) int32 {
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.start == s && n.end == e && !n.extra() {
			return int32(i)
		}
	}
	return -1
}

// beforeOwnSemi returns the node that spans the fragment [s, e) but for
// the fragment's own final `;`, where that `;` is a token of the list
// holding the node rather than the node's: a TypeScript class field
// (`private $F: $T;`) or an abstract method signature ends before it. The
// node is what the pattern searches for, as ast-grep's member selector
// finds it. It returns -1 otherwise.
func beforeOwnSemi(t *Tree, s, e uint32) int32 {
	if e <= s || t.Src[e-1] != ';' {
		return -1
	}
	end := e - 1
	for end > s && (t.Src[end-1] == ' ' || t.Src[end-1] == '\t' || t.Src[end-1] == '\n' || t.Src[end-1] == '\r') {
		end--
	}
	root := outermost(t, s, end)
	if root < 0 {
		return -1
	}
	next := t.nodes[root].next
	for next >= 0 && t.nodes[next].extra() {
		next = t.nodes[next].next
	}
	if next < 0 || t.nodes[next].start != e-1 || t.nodes[next].end != e || t.nodes[next].first >= 0 {
		return -1
	}
	return root
}

// build finishes a pattern from the rung's tree: it descends through
// wrappers that hold one child of the same span (an expression statement
// around a call matches the call anywhere), marks the metavariables and
// collects the literal tokens. semi, when not negative, is the offset of
// the `;` the rung put after the fragment and the fragment's node took in.
func build(l *Language, src, rung string, t *Tree, root int32, metas map[string]metaVar, semi int64) *Pattern {
	p := &Pattern{Lang: l, Source: src, Context: rung, tree: t, meta: map[int32]metaVar{}, spellings: len(metas)}
	// metaOf: a node whose text is a metavariable stands for it, as in
	// ast-grep. The rung's `;` is no text of the user's: in `for (...)
	// $$$BODY` the body is the statement `$$$BODY;` only by it, and that
	// statement is the metavariable (as the one a missing `;` ends would
	// be), so the body matches a block, not only an expression statement.
	metaOf := func(i int32) (metaVar, bool) {
		if v, ok := metas[string(t.text(i))]; ok {
			return v, true
		}
		if n := &t.nodes[i]; semi >= 0 && int64(n.end) == semi+1 && int64(n.start) < semi {
			v, ok := metas[string(bytes.TrimSpace(t.Src[n.start:semi]))]
			return v, ok
		}
		return metaVar{}, false
	}
	for {
		if _, ok := metaOf(root); ok {
			break
		}
		only := int32(-1)
		count := 0
		for c := t.nodes[root].first; c >= 0; c = t.nodes[c].next {
			if t.nodes[c].extra() {
				continue
			}
			only = c
			count++
		}
		if count != 1 || t.nodes[only].start != t.nodes[root].start || t.nodes[only].end != t.nodes[root].end {
			break
		}
		root = only
	}
	p.root = root
	p.kids = make([][]int32, len(t.nodes))
	for i := range t.nodes {
		for c := t.nodes[i].first; c >= 0; c = t.nodes[c].next {
			if !t.nodes[c].extra() {
				p.kids[i] = append(p.kids[i], c)
			}
		}
	}
	seen := map[string]bool{}
	var seq [][]byte // the pattern's leaves in order; nil for a metavariable
	var walk func(i int32)
	walk = func(i int32) {
		n := &t.nodes[i]
		if v, ok := metaOf(i); ok {
			p.meta[i] = v
			seq = append(seq, nil)
			if v.captures() && !seen[v.name] {
				seen[v.name] = true
				p.names = append(p.names, v.name)
			}
			return
		}
		if n.first < 0 {
			if tok := bytes.TrimSpace(t.text(i)); len(tok) > 0 {
				p.tokens = append(p.tokens, tok)
				seq = append(seq, tok)
			}
			return
		}
		for c := n.first; c >= 0; c = t.nodes[c].next {
			if !t.nodes[c].extra() {
				walk(c)
			}
		}
	}
	walk(root)
	for i := 0; i+2 < len(seq); i++ {
		if word(seq[i]) && string(seq[i+1]) == "." && word(seq[i+2]) {
			p.dotted = append(p.dotted, [2][]byte{seq[i], seq[i+2]})
		}
	}
	// Longer tokens are rarer: test them first, and at most a few.
	sort.SliceStable(p.tokens, func(a, b int) bool { return len(p.tokens[a]) > len(p.tokens[b]) })
	uniq := p.tokens[:0]
	for _, tok := range p.tokens {
		dup := false
		for _, u := range uniq {
			if bytes.Contains(u, tok) {
				dup = true
				break
			}
		}
		if !dup {
			uniq = append(uniq, tok)
		}
	}
	if len(uniq) > 4 {
		uniq = uniq[:4]
	}
	p.tokens = uniq
	return p
}

// mayMatch is the literal prefilter: a file lacking one of the pattern's
// literal tokens cannot hold a match, since leaves match by exact text; nor
// can one where a literal member access `a.b` of the pattern never occurs
// (with only layout or comments between its tokens).
func (p *Pattern) mayMatch(src []byte) bool {
	if p.mayMatchOne(src) {
		return true
	}
	for _, a := range p.alts {
		if a.mayMatchOne(src) {
			return true
		}
	}
	return false
}

func (p *Pattern) mayMatchOne(src []byte) bool {
	for _, tok := range p.tokens {
		if !bytes.Contains(src, tok) {
			return false
		}
	}
	for _, d := range p.dotted {
		if !dottedIn(src, d[0], d[1]) {
			return false
		}
	}
	return true
}

// word reports an identifier-like token.
func word(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80) {
			return false
		}
	}
	return true
}

// dottedIn reports whether src may hold a, '.', b in a row. Whitespace may
// separate them; where a comment starts between them it returns true
// rather than parse the comment (a prefilter may pass too much, never too
// little).
func dottedIn(src, a, b []byte) bool {
	for from := 0; ; {
		i := bytes.Index(src[from:], a)
		if i < 0 {
			return false
		}
		j := from + i + len(a)
		from = from + i + 1
		j, c := skipSpace(src, j)
		if c {
			return true
		}
		if j >= len(src) || src[j] != '.' {
			continue
		}
		j, c = skipSpace(src, j+1)
		if c || bytes.HasPrefix(src[j:], b) {
			return true
		}
	}
}

// skipSpace skips whitespace from i; comment reports that a comment (in any
// of the shipped languages' syntaxes) starts where it stopped.
func skipSpace(src []byte, i int) (int, bool) {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r' || src[i] == '\\') {
		i++
	}
	if i < len(src) && src[i] == '#' {
		return i, true
	}
	if i+1 < len(src) && src[i] == '/' && (src[i+1] == '/' || src[i+1] == '*') {
		return i, true
	}
	return i, false
}
