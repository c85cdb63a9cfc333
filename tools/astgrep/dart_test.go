//go:build dart

package astgrep_test

import (
	"os"
	"strings"
	"testing"
)

// copyApp puts the engine's Flutter-style test package into the workspace.
func copyApp(s *sandbox) {
	s.t.Helper()
	if err := os.CopyFS(s.ws, os.DirFS("engine/testdata/flutter_app")); err != nil {
		s.t.Fatal(err)
	}
}

// The seed's first example through the tool: the two guarded disposes, by
// file and line, with the capture.
func TestDartSeedGrepThroughTheTool(t *testing.T) {
	s := newSandbox(t)
	copyApp(s)
	out := s.ok("ast_grep", map[string]any{"pattern": "if ($X != null) $X.dispose()", "language": "dart"})
	for _, want := range []string{
		"2 matches in 2 files",
		"lib/src/widgets/search_box.dart:25", "if (controller != null) controller.dispose()",
		"lib/src/widgets/video_panel.dart:24", "if (pages != null) pages.dispose()",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ast_grep output lacks %q:\n%s", want, out)
		}
	}
	// The language comes from a .dart file's extension.
	one := s.ok("ast_grep", map[string]any{"pattern": "if ($X != null) $X.dispose()", "path": "lib/src/widgets/video_panel.dart"})
	if !strings.Contains(one, "1 match in 1 file") || !strings.Contains(one, "pages") {
		t.Errorf("by extension:\n%s", one)
	}
}

// The seed's second example through the tool: prepared, accepted, and the
// calls are method calls with their `;` kept.
func TestDartSeedEditThroughTheTool(t *testing.T) {
	s := newSandbox(t)
	copyApp(s)
	out := s.ok("ast_edit", map[string]any{"pattern": "dispose($X)", "rewrite": "$X.dispose()", "language": "dart"})
	if !strings.Contains(out, "3 ") || !strings.Contains(out, "+    controller.dispose();") {
		t.Errorf("ast_edit preview:\n%s", out)
	}
	s.ok("resolve", map[string]any{"edit_id": editID(t, out), "action": "accept"})
	got := s.read("lib/src/widgets/video_panel.dart")
	for _, want := range []string{"    playing.dispose();\n  }", "    controller.dispose();\n", "    playing.dispose();\n    super.dispose();"} {
		if !strings.Contains(got, want) {
			t.Errorf("video_panel.dart lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "dispose(controller)") || strings.Contains(got, "dispose(playing)") {
		t.Errorf("a call was left:\n%s", got)
	}
	if util := s.read("lib/src/util/dispose.dart"); !strings.Contains(util, "void dispose(ChangeNotifier? notifier) {") {
		t.Errorf("the helper's signature was rewritten:\n%s", util)
	}
}

// With the grammar, the schemas list dart among the grammars.
func TestDartListedInTheSchemas(t *testing.T) {
	s := newSandbox(t)
	n := 0
	for _, spec := range s.reg.Visible(s.env) {
		if spec.Name == "ast_grep" || spec.Name == "ast_edit" {
			n++
			if schema := string(spec.InputSchema); !strings.Contains(schema, "Grammar: bash, c, cpp, dart, go,") || strings.Contains(schema, "not built") {
				t.Errorf("%s schema:\n%s", spec.Name, schema)
			}
		}
	}
	if n != 2 {
		t.Errorf("found %d of the two tools' specs", n)
	}
}
