package engine

import (
	"context"
	"errors"
	"sort"
	"unsafe"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// Node flags.
const (
	flagNamed uint8 = 1 << iota
	flagExtra
	flagError
	flagMissing
)

// node is one syntax node of a flattened tree. Children are linked by index
// so a tree is two slices: matching runs in Go without crossing into C, and
// a cached tree holds no C memory.
type node struct {
	start, end  uint32
	first, next int32 // first child, next sibling; -1 for none
	kind        uint16
	flags       uint8
}

func (n *node) named() bool { return n.flags&flagNamed != 0 }
func (n *node) extra() bool { return n.flags&flagExtra != 0 }

// Tree is a parsed file: its source and its flattened syntax tree.
type Tree struct {
	Src   []byte
	nodes []node
	lines []uint32 // byte offset of each line start, built on first use
}

// bytes is what the tree costs in memory, for the cache's bound.
func (t *Tree) bytes() int64 {
	return int64(len(t.Src)) + int64(len(t.nodes))*int64(unsafe.Sizeof(node{})) + int64(len(t.lines))*4 + 64
}

// text is the source of node i.
func (t *Tree) text(i int32) []byte { n := &t.nodes[i]; return t.Src[n.start:n.end] }

// line returns the 1-based line of byte offset off.
func (t *Tree) line(off uint32) int {
	if t.lines == nil {
		t.lines = lineStarts(t.Src)
	}
	return sort.Search(len(t.lines), func(i int) bool { return t.lines[i] > off })
}

func lineStarts(src []byte) []uint32 {
	ls := []uint32{0}
	for i, c := range src {
		if c == '\n' {
			ls = append(ls, uint32(i+1))
		}
	}
	return ls
}

// firstError returns the byte offset of the first ERROR or MISSING node.
func (t *Tree) firstError() (uint32, bool) {
	for i := range t.nodes {
		if t.nodes[i].flags&(flagError|flagMissing) != 0 {
			return t.nodes[i].start, true
		}
	}
	return 0, false
}

// firstFlaw is firstError; with lenient, a MISSING `;` is no flaw.
func (t *Tree) firstFlaw(l *Language, lenient bool) (uint32, bool) {
	if !lenient {
		return t.firstError()
	}
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.flags&flagError != 0 || (n.flags&flagMissing != 0 && l.ts.NodeKindForId(n.kind) != ";") {
			return n.start, true
		}
	}
	return 0, false
}

// errTooLarge: tree-sitter offsets are 32-bit.
var errTooLarge = errors.New("file too large to parse (4 GiB or more)")

// errParseCanceled is returned when a parse was stopped by its context.
var errParseCanceled = errors.New("parse canceled")

// parser is one tree-sitter parser bound to a language. It is not safe for
// concurrent use; a worker owns one per language it meets.
type parser struct {
	p    *sitter.Parser
	lang *Language
}

func newParser(l *Language) (*parser, error) {
	p := sitter.NewParser()
	if err := p.SetLanguage(l.ts); err != nil {
		p.Close()
		return nil, err
	}
	return &parser{p: p, lang: l}, nil
}

func (p *parser) Close() { p.p.Close() }

// parse parses src and flattens the result; the C tree is freed before it
// returns.
func (p *parser) parse(ctx context.Context, src []byte) (*Tree, error) {
	// One file parses in milliseconds, so cancellation is checked between
	// files rather than inside the parser (ParseCtx costs a goroutine per
	// parse).
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(src) >= 1<<32-1 {
		return nil, errTooLarge
	}
	if t := parseFlat(p.p, src); t != nil {
		return t, nil
	}
	// The one-call path gave up: parse and walk through the binding.
	ts := p.p.Parse(src, nil)
	if ts == nil {
		return nil, errParseCanceled
	}
	defer ts.Close()
	return flatten(ts, src), nil
}

// flatten copies a tree-sitter tree into a Tree, walking it with a cursor.
func flatten(ts *sitter.Tree, src []byte) *Tree {
	c := ts.Walk()
	defer c.Close()
	t := &Tree{Src: src, nodes: make([]node, 0, len(src)/3+16)}
	type frame struct{ idx, last int32 }
	stack := make([]frame, 0, 64)
	add := func() int32 {
		n := c.Node()
		var f uint8
		if n.IsNamed() {
			f |= flagNamed
		}
		if n.IsExtra() {
			f |= flagExtra
		}
		if n.IsError() {
			f |= flagError
		}
		if n.IsMissing() {
			f |= flagMissing
		}
		// A zero-width token (a grammar's implicit terminator, a `;` the
		// parser made up) is not source the user wrote: skip it like a
		// comment. A named node the parser made up stays: the name of an
		// anonymous bit-field (`unsigned :8;`) is one, and a one-node
		// metavariable stands for it, empty, as in ast-grep.
		if n.StartByte() == n.EndByte() && f&flagNamed == 0 {
			f |= flagExtra
		}
		t.nodes = append(t.nodes, node{
			start: uint32(n.StartByte()), end: uint32(n.EndByte()),
			first: -1, next: -1, kind: n.KindId(), flags: f,
		})
		i := int32(len(t.nodes) - 1)
		if k := len(stack); k > 0 {
			top := &stack[k-1]
			if top.last < 0 {
				t.nodes[top.idx].first = i
			} else {
				t.nodes[top.last].next = i
			}
			top.last = i
		}
		return i
	}
	cur := add()
	for {
		if c.GotoFirstChild() {
			stack = append(stack, frame{idx: cur, last: -1})
			cur = add()
			continue
		}
		for !c.GotoNextSibling() {
			if !c.GotoParent() {
				return t
			}
			stack = stack[:len(stack)-1]
		}
		cur = add()
	}
}
