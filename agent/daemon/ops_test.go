package daemon

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// protoOps reads the Op constants agent/proto declares: name -> wire value.
func protoOps(t *testing.T) map[string]proto.Op {
	t.Helper()
	ops := map[string]proto.Op{}
	for _, f := range parseDir(t, "../proto") {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || vs.Type == nil || fmt.Sprint(vs.Type) != "Op" {
				return true
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("proto.%s is not a string literal; this test reads the ops from the source", name.Name)
				}
				v, _ := strconv.Unquote(lit.Value)
				ops[name.Name] = proto.Op(v)
			}
			return true
		})
	}
	if len(ops) == 0 {
		t.Fatal("found no Op constants in agent/proto")
	}
	return ops
}

// clientOps finds every op sandboxd's client (package agent) puts in a
// proto.Request it builds, and where.
func clientOps(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	sent := map[string]string{}
	for name, f := range parseDirWith(t, fset, "..") {
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || !isSelector(cl.Type, "proto", "Request") {
				return true
			}
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok || fmt.Sprint(kv.Key) != "Op" {
					continue
				}
				sel, ok := kv.Value.(*ast.SelectorExpr)
				if !ok || fmt.Sprint(sel.X) != "proto" {
					t.Fatalf("%s: a request's op is %s, not a proto.Op constant; this test reads the client's ops from the source", fset.Position(kv.Pos()), fmt.Sprint(kv.Value))
				}
				sent[sel.Sel.Name] = fmt.Sprintf("%s:%d", filepath.Base(name), fset.Position(kv.Pos()).Line)
			}
			return true
		})
	}
	return sent
}

func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name && fmt.Sprint(sel.X) == pkg
}

func parseDir(t *testing.T, dir string) map[string]*ast.File {
	return parseDirWith(t, token.NewFileSet(), dir)
}

// parseDirWith parses the non-test Go files of dir.
func parseDirWith(t *testing.T, fset *token.FileSet, dir string) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
	}
	return files
}

// Every op the client can send reaches a handler: an op it sends that the
// table lacks would be rejected as unknown in every sandbox.
func TestEveryClientOpHasAHandler(t *testing.T) {
	declared := protoOps(t)
	sent := clientOps(t)
	// The client's exchanges are spread over its files (watch.go's among
	// them): finding fewer means the source walk missed them.
	for _, must := range []string{"OpHello", "OpReadFile", "OpExec", "OpAttach", "OpWatch", "OpClaim", "OpSetEnv"} {
		if _, ok := sent[must]; !ok {
			t.Fatalf("found the client sending %v, without proto.%s; the source walk is broken", slices.Sorted(maps.Keys(sent)), must)
		}
	}
	srv := New()
	defer srv.Close()
	for name, where := range sent {
		op, ok := declared[name]
		if !ok {
			t.Errorf("%s: the client sends proto.%s, which agent/proto does not declare as an Op", where, name)
			continue
		}
		if srv.ops[op] == nil {
			t.Errorf("%s: the client sends %q (proto.%s), but no service registers a handler for it", where, op, name)
		}
	}
	// A handler under a name the protocol does not have is never reached.
	known := map[proto.Op]bool{}
	for _, op := range declared {
		known[op] = true
	}
	for op := range srv.ops {
		if !known[op] {
			t.Errorf("the table has a handler for %q, which is not an op agent/proto declares", op)
		}
	}
}

// An op the table lacks gets the one refusal, whatever the request holds,
// and so does a request without an op.
func TestUnknownOpIsRefusedInOneSentence(t *testing.T) {
	sess := rawSession(t, New())
	for _, tc := range []struct{ raw, want string }{
		{`{"op":"format_disk"}`, `unknown op "format_disk"; this agent speaks protocol version 1`},
		{`{"op":"format_disk","again":true,"read_file":{"root":"/","path":"x"}}`, `unknown op "format_disk"; this agent speaks protocol version 1`},
		{`{"op":"Read_File"}`, `unknown op "Read_File"; this agent speaks protocol version 1`},
		{`{"op":""}`, `the request has no op; set "op" to one of the protocol's operations`},
	} {
		resp := exchange(t, sess, frame(tc.raw))
		if resp.Error == nil || resp.Error.Code != "invalid_argument" || resp.Error.Message != tc.want || resp.Kept {
			t.Errorf("%s: answer %+v (error %+v), want the invalid_argument %q, stream not kept", tc.raw, resp, resp.Error, tc.want)
		}
	}
}

// Every op in the table is reached over the wire: sent without its body,
// an op that needs one is refused for the missing body (not as unknown),
// and hello, list, ports and activity, which need none, get their responses.
func TestEveryOpIsServedOverTheWire(t *testing.T) {
	srv := New()
	sess := rawSession(t, srv)
	for op := range srv.ops {
		resp := exchange(t, sess, frame(fmt.Sprintf(`{"op":%q}`, op)))
		switch op {
		case proto.OpHello:
			if resp.Error != nil || resp.Hello == nil || resp.Hello.Version != proto.Version {
				t.Errorf("hello: answer %+v", resp)
			}
		case proto.OpList:
			if resp.Error != nil || resp.List == nil {
				t.Errorf("list without a body: answer %+v, error %+v; want the list of every process", resp, resp.Error)
			}
		case proto.OpPorts:
			if resp.Error != nil || resp.Ports == nil {
				t.Errorf("ports, which takes no body: answer %+v, error %+v; want the listening ports", resp, resp.Error)
			}
		case proto.OpActivity:
			if resp.Error != nil || resp.Activity == nil || resp.Activity.At.IsZero() {
				t.Errorf("activity, which takes no body: answer %+v, error %+v; want the processes' activity", resp, resp.Activity)
			}
		default:
			want := fmt.Sprintf("request %q has no %q body; set the field named like the op", op, op)
			if resp.Error == nil || resp.Error.Code != "invalid_argument" || resp.Error.Message != want {
				t.Errorf("%s without its body: error %+v, want the invalid_argument %q", op, resp.Error, want)
			}
		}
	}
}
