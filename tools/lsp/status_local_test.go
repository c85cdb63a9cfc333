package lsp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Where the Dart SDK is not installed (the sandbox image has none), status
// says that it is what is missing, and the C/C++ root-marker error says how
// to make a compile_commands.json rather than a Go module.
func TestStatusSaysTheDartSDKIsMissing(t *testing.T) {
	if _, err := exec.LookPath("dart"); err == nil {
		t.Skip("dart is on this machine's PATH; the test needs a machine without the Dart SDK")
	}
	bx := newLocalBox(t, "twice")
	for name, data := range map[string]string{"app/pubspec.yaml": "name: app\n", "app/lib/main.dart": "void main() {}\n", "native/x.c": "int main(void) { return 0; }\n"} {
		p := filepath.Join(bx.ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bx.ok("lsp", map[string]any{"action": "status", "file": "app/lib/main.dart"},
		"- dart: cannot start: binary \"dart\" not found on the sandbox's PATH: the Dart SDK (for `dart language-server`) is not installed in the sandbox\n")
	bx.bad("lsp", map[string]any{"action": "hover", "file": "app/lib/main.dart", "line": 1, "symbol": "main"},
		"binary \"dart\" not found on the sandbox's PATH: the Dart SDK (for `dart language-server`) is not installed in the sandbox")
	out := bx.bad("lsp", map[string]any{"action": "hover", "file": "native/x.c", "line": 1, "symbol": "main"},
		"no c root marker (compile_commands.json, CMakeLists.txt) at or above native", "bear -- make", "or add a CMakeLists.txt")
	if strings.Contains(out, "go mod init") {
		t.Errorf("the C error suggests a Go module:\n%s", out)
	}
}
