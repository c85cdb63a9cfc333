package engine

/*
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>

// The tree-sitter runtime is compiled into the binary by the go-tree-sitter
// package; these are declarations of its public C API (tree_sitter/api.h),
// resolved when the binary is linked.
typedef struct TSTree TSTree;
typedef struct TSParser TSParser;
extern TSTree *ts_parser_parse_string(TSParser *self, const TSTree *old_tree, const char *string, uint32_t length);
extern void ts_tree_delete(TSTree *self);
extern void ts_set_allocator(void *(*new_malloc)(size_t), void *(*new_calloc)(size_t, size_t), void *(*new_realloc)(void *, size_t), void (*new_free)(void *));

// use_libc_allocator points tree-sitter's allocations straight at libc.
// The binding routes them through Go callbacks that only call C's malloc
// and free in turn; a parse allocates per node, and the round trips cost
// more than the parse. Memory from either path is libc's, so the switch
// is safe at any time.
static void use_libc_allocator(void) { ts_set_allocator(malloc, calloc, realloc, free); }
typedef struct { uint32_t context[4]; const void *id; const TSTree *tree; } TSNode;
typedef struct { const void *tree; const void *id; uint32_t context[3]; } TSTreeCursor;
extern TSNode ts_tree_root_node(const TSTree *self);
extern uint32_t ts_node_descendant_count(TSNode self);
extern TSTreeCursor ts_tree_cursor_new(TSNode node);
extern void ts_tree_cursor_delete(TSTreeCursor *self);
extern TSNode ts_tree_cursor_current_node(const TSTreeCursor *self);
extern bool ts_tree_cursor_goto_first_child(TSTreeCursor *self);
extern bool ts_tree_cursor_goto_next_sibling(TSTreeCursor *self);
extern bool ts_tree_cursor_goto_parent(TSTreeCursor *self);
extern uint16_t ts_node_symbol(TSNode self);
extern uint32_t ts_node_start_byte(TSNode self);
extern uint32_t ts_node_end_byte(TSNode self);
extern bool ts_node_is_named(TSNode self);
extern bool ts_node_is_extra(TSNode self);
extern bool ts_node_is_missing(TSNode self);

// flat_node mirrors the Go type node field by field.
typedef struct {
	uint32_t start, end;
	int32_t first, next;
	uint16_t kind;
	uint8_t flags;
	uint8_t pad;
} flat_node;

enum { F_NAMED = 1, F_EXTRA = 2, F_ERROR = 4, F_MISSING = 8 };

// flatten_tree writes the tree's nodes in preorder into out (cap entries)
// and returns how many it wrote, or -1 when cap was too small or memory
// ran out. One call per file instead of several per node.
static int64_t flatten_tree(const TSTree *tree, flat_node *out, int64_t cap) {
	TSTreeCursor c = ts_tree_cursor_new(ts_tree_root_node(tree));
	int64_t n = 0, depth = 0, stack_cap = 256;
	int32_t *parent = malloc(sizeof(int32_t) * stack_cap);
	int32_t *last = malloc(sizeof(int32_t) * stack_cap);
	if (!parent || !last) { free(parent); free(last); ts_tree_cursor_delete(&c); return -1; }
	for (;;) {
		if (n >= cap) { n = -1; break; }
		TSNode x = ts_tree_cursor_current_node(&c);
		flat_node *f = &out[n];
		f->start = ts_node_start_byte(x);
		f->end = ts_node_end_byte(x);
		f->first = -1;
		f->next = -1;
		f->kind = ts_node_symbol(x);
		uint8_t fl = 0;
		if (ts_node_is_named(x)) fl |= F_NAMED;
		if (ts_node_is_extra(x)) fl |= F_EXTRA;
		if (f->kind == 0xFFFF) fl |= F_ERROR;
		if (f->start == f->end) {
			if (ts_node_is_missing(x)) fl |= F_MISSING;
			// As in flatten (tree.go): only unnamed zero-width tokens are
			// skipped like comments.
			if (!(fl & F_NAMED)) fl |= F_EXTRA;
		}
		f->flags = fl;
		f->pad = 0;
		if (depth > 0) {
			if (last[depth - 1] < 0) out[parent[depth - 1]].first = (int32_t)n;
			else out[last[depth - 1]].next = (int32_t)n;
			last[depth - 1] = (int32_t)n;
		}
		int64_t cur = n++;
		if (ts_tree_cursor_goto_first_child(&c)) {
			if (depth == stack_cap) {
				stack_cap *= 2;
				int32_t *p2 = realloc(parent, sizeof(int32_t) * stack_cap);
				if (!p2) { n = -1; break; }
				parent = p2;
				int32_t *l2 = realloc(last, sizeof(int32_t) * stack_cap);
				if (!l2) { n = -1; break; }
				last = l2;
			}
			parent[depth] = (int32_t)cur;
			last[depth] = -1;
			depth++;
			continue;
		}
		bool done = false;
		while (!ts_tree_cursor_goto_next_sibling(&c)) {
			if (!ts_tree_cursor_goto_parent(&c)) { done = true; break; }
			depth--;
		}
		if (done) break;
	}
	free(parent);
	free(last);
	ts_tree_cursor_delete(&c);
	return n;
}

static uint32_t descendants(const TSTree *tree) {
	return ts_node_descendant_count(ts_tree_root_node(tree));
}
*/
import "C"

import (
	"unsafe"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

func init() { C.use_libc_allocator() }

// parseFlat parses src with the binding's parser in one call into C (no
// read callbacks into Go) and flattens the tree; the C tree is deleted
// before it returns. It returns nil when the parser gave up (cancelled or
// no language) or the flattening did.
func parseFlat(p *sitter.Parser, src []byte) *Tree {
	inner := *(**C.TSParser)(unsafe.Pointer(p))
	var text *C.char
	if len(src) > 0 {
		text = (*C.char)(unsafe.Pointer(&src[0]))
	}
	ts := C.ts_parser_parse_string(inner, nil, text, C.uint32_t(len(src)))
	if ts == nil {
		return nil
	}
	defer C.ts_tree_delete(ts)
	return flattenInner(ts, src)
}

// The C mirror of node must have the same layout.
var _ [1]struct{} = [unsafe.Sizeof(node{}) - unsafe.Sizeof(C.flat_node{}) + 1]struct{}{}

// cTree is the C tree inside a binding Tree: its first and only field.
func cTree(t *sitter.Tree) *C.TSTree { return *(**C.TSTree)(unsafe.Pointer(t)) }

// flattenC copies the tree in one call into C. It returns nil when the
// node count was off, and the caller walks the tree from Go instead.
func flattenC(ts *sitter.Tree, src []byte) *Tree { return flattenInner(cTree(ts), src) }

func flattenInner(inner *C.TSTree, src []byte) *Tree {
	n := int64(C.descendants(inner)) + 1
	nodes := make([]node, n)
	got := C.flatten_tree(inner, (*C.flat_node)(unsafe.Pointer(&nodes[0])), C.int64_t(n))
	if got < 0 {
		return nil
	}
	return &Tree{Src: src, nodes: nodes[:got:got]}
}
