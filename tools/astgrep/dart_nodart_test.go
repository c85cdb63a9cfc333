//go:build !dart

package astgrep_test

import (
	"strings"
	"testing"
)

const notBuilt = "Dart grammar not built: run make build (fetches tree-sitter-dart 1.0.0 from npm)"

// A binary built without the grammar says so, and what to do, wherever Dart
// is asked for: by name, by a .dart file, in the language list and in the
// tools' schemas.
func TestDartNotBuiltSaysHowToBuildIt(t *testing.T) {
	s := newSandbox(t)
	s.write("lib/main.dart", "void main() {}\n")
	s.write("a.go", "package a\n")
	for _, c := range []struct {
		args  map[string]any
		wants []string
	}{
		{map[string]any{"pattern": "dispose($X)", "language": "dart"}, []string{`language "dart" is not in this build: ` + notBuilt}},
		{map[string]any{"pattern": "dispose($X)", "path": "lib/main.dart"}, []string{"lib/main.dart is Dart, which is not in this build: " + notBuilt}},
		{map[string]any{"pattern": "f($X)"}, []string{"give language", "bash", "(no dart: " + notBuilt + ")"}},
	} {
		for _, tool := range []string{"ast_grep", "ast_edit"} {
			args := c.args
			if tool == "ast_edit" {
				args = map[string]any{"rewrite": "x"}
				for k, v := range c.args {
					args[k] = v
				}
			}
			out := s.fail(tool, args)
			for _, w := range c.wants {
				if !strings.Contains(out, w) {
					t.Errorf("%s %v: %q lacks %q", tool, args, out, w)
				}
			}
		}
	}
	seen := 0
	for _, spec := range s.reg.Visible(s.env) {
		if spec.Name != "ast_grep" && spec.Name != "ast_edit" {
			continue
		}
		seen++
		if schema := string(spec.InputSchema); !strings.Contains(schema, "tsx or typescript (no dart: "+notBuilt+")") {
			t.Errorf("%s schema does not say Dart is missing and why:\n%s", spec.Name, schema)
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the two tools' specs", seen)
	}
}
