package debug

import (
	"fmt"
	"strings"
	"testing"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/tools"
)

func TestCapValue(t *testing.T) {
	long := strings.Repeat("é", 1000)
	got := capValue(long)
	if !strings.HasPrefix(got, strings.Repeat("é", 400)+"…") || !strings.HasSuffix(got, "(600 more characters)") {
		t.Fatalf("capValue: %q", got[len(got)-40:])
	}
	if capValue("short") != "short" {
		t.Fatal("a short value changed")
	}
}

func TestVariablesCapped(t *testing.T) {
	var vars []godap.Variable
	for i := range 73 {
		vars = append(vars, godap.Variable{Name: fmt.Sprint("k", i), Value: "1", Type: "int"})
	}
	vars[0].VariablesReference = 9
	out := describeVariables(5, vars)
	if n := strings.Count(out, "\n- "); n != maxChildren {
		t.Fatalf("%d children shown", n)
	}
	if !strings.Contains(out, "... 23 more not shown (cap 50)") || !strings.Contains(out, "- k0 (int) = 1 [ref 9]") {
		t.Fatalf("out:\n%s", out)
	}
}

func TestAdapterChoice(t *testing.T) {
	for prog, want := range map[string]string{"a.py": adapterDebugpy, "cmd/x/main.go": adapterDelve, "bin/app": adapterLLDB, "m.dart": adapterDart} {
		if got := adapterFor(prog, false); got != want {
			t.Errorf("%s: %s, want %s", prog, got, want)
		}
	}
	if adapterFor("cmd/server", true) != adapterDelve {
		t.Error("a directory is a Go package")
	}
}

func TestAvailableAndSchema(t *testing.T) {
	reg := tools.NewRegistry()
	tool := New(NewSupervisor())
	reg.Register(tool) // panics if the schema does not compile
	run := &tools.Run{Conversation: "c", Surface: tools.SurfaceDefault}
	if !tool.Available(&tools.Env{Run: run, HasSandbox: true}) {
		t.Error("not available with a conversation and a sandbox")
	}
	if tool.Available(&tools.Env{Run: run}) || tool.Available(&tools.Env{Run: &tools.Run{}, HasSandbox: true}) {
		t.Error("available without a sandbox or without a conversation")
	}
	if specs := reg.Visible(&tools.Env{Run: &tools.Run{Conversation: "c", Surface: tools.SurfacePlan}, HasSandbox: true}); len(specs) != 0 {
		t.Error("an exec tool is visible to a plan run")
	}
	if tool.Spec().ParallelSafe {
		t.Error("debug must not be parallel-safe")
	}
}
