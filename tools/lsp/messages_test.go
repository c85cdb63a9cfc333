package lsp

import (
	"strings"
	"testing"
)

// gopls's serverInfo.version as gopls v0.2x sends it (shortened: the real
// one lists every dependency and is about 2.5 KB).
const goplsVersion = `{"GoVersion":"go1.26.0","Path":"golang.org/x/tools/gopls","Main":{"Path":"golang.org/x/tools/gopls","Version":"v0.20.0","Sum":"h1:abc="},` +
	`"Deps":[{"Path":"github.com/BurntSushi/toml","Version":"v1.4.1","Sum":"h1:x="},{"Path":"golang.org/x/mod","Version":"v0.26.0","Sum":"h1:y="}],` +
	`"Settings":[{"Key":"-buildmode","Value":"exe"},{"Key":"CGO_ENABLED","Value":"0"}],"Version":"v0.20.0"}`

func TestServerLabelKeepsNameAndVersionOnly(t *testing.T) {
	for _, c := range []struct{ name, version, want string }{
		{"gopls", goplsVersion, "gopls v0.20.0"},
		{"gopls", `{"Main":{"Version":"v0.19.1"}}`, "gopls v0.19.1"},
		{"gopls", `{"not":"a version"}`, "gopls"},
		{"gopls", `{truncated`, "gopls"},
		{"pyright", "1.1.400", "pyright 1.1.400"},
		{"clangd", "", "clangd"},
		{"x", strings.Repeat("9", 100), "x " + strings.Repeat("9", maxVersion) + "..."},
	} {
		if got := serverLabel(c.name, c.version); got != c.want {
			t.Errorf("serverLabel(%q, %.40q) = %q, want %q", c.name, c.version, got, c.want)
		}
	}
}

func TestMissingDartSaysTheSDK(t *testing.T) {
	dart := DefaultLanguages()[5]
	if dart.Name != "dart" {
		t.Fatalf("language 5 is %s", dart.Name)
	}
	const want = "binary \"dart\" not found on the sandbox's PATH: the Dart SDK (for `dart language-server`) is not installed in the sandbox"
	if got := missingBinary(dart, []string{"dart"}); got != want {
		t.Errorf("dart: %q, want %q", got, want)
	}
	rust := DefaultLanguages()[4]
	if got := missingBinary(rust, []string{"rust-analyzer"}); got != `binary "rust-analyzer" not found on the sandbox's PATH` {
		t.Errorf("rust: %q", got)
	}
}

func TestRootHintPerLanguage(t *testing.T) {
	for _, l := range DefaultLanguages() {
		h := rootHint(l)
		if l.Name != "go" && strings.Contains(h, "go mod") {
			t.Errorf("%s hint suggests Go: %q", l.Name, h)
		}
		for _, m := range map[string][]string{"go": {"go mod init"}, "c": {"compile_commands.json", "bear -- make", "CMakeLists.txt"}, "rust": {"cargo init"}, "dart": {"pubspec.yaml"}}[l.Name] {
			if !strings.Contains(h, m) {
				t.Errorf("%s hint %q lacks %q", l.Name, h, m)
			}
		}
	}
	if h := rootHint(&Language{Name: "zig"}); h != "create one of them at the project's top" {
		t.Errorf("generic hint %q", h)
	}
}

// typescript-language-server throws tsserver's reason, which vscode-jsonrpc
// wraps; the tool says it in its own words (the Python path's for "no
// symbol here").
func TestRenameRefusalWording(t *testing.T) {
	ts := DefaultLanguages()[2]
	wrap := func(m string) string {
		return "the typescript language server could not answer rename: Request textDocument/prepareRename failed with message: " + m
	}
	for _, c := range []struct{ msg, want string }{
		{wrap("You cannot rename this element."), "the typescript server says there is no renamable symbol there (a keyword, literal or comment?)"},
		{wrap("You cannot rename elements that are defined in the standard TypeScript library."), "it is declared in TypeScript's standard library (lib.*.d.ts), not in this project; rename only the project's own symbols"},
		{wrap("You cannot rename elements that are defined in a 'node_modules' folder."), "it is declared in a package under node_modules, not in this project; rename only the project's own symbols"},
		{wrap("Something new."), "the typescript server refused: Something new."},
		{"the typescript language server could not answer rename: No project.", "the typescript server refused: No project."},
	} {
		got := renameRefusal(ts, c.msg)
		if got != c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.msg, got, c.want)
		}
		if strings.Contains(got, "Request textDocument") || strings.Contains(got, "could not answer") {
			t.Errorf("the framing shows: %q", got)
		}
	}
}

// tsserver, asked to prepare a rename at the keyword of `const sq = ...`,
// may respond with the range of `sq`: the rename is refused rather than
// applied to another name.
func TestPreparedRangeElsewhereIsRefused(t *testing.T) {
	doc := newDocument("import x;\nconst größe = newSquare(2);\n")
	at := Position{Line: 1, Character: 0}
	for _, c := range []struct {
		raw  string
		pos  Position
		want string
		off  bool
	}{
		{`{"start":{"line":1,"character":6},"end":{"line":1,"character":11}}`, at, "größe", true},
		{`{"range":{"start":{"line":1,"character":6},"end":{"line":1,"character":11}},"placeholder":"größe"}`, at, "größe", true},
		{`{"start":{"line":1,"character":0},"end":{"line":1,"character":5}}`, at, "", false},
		{`{"start":{"line":1,"character":6},"end":{"line":1,"character":11}}`, Position{Line: 1, Character: 8}, "", false},
		{`{"defaultBehavior":true}`, at, "", false},
	} {
		got, off := preparedElsewhere([]byte(c.raw), c.pos, doc, encUTF16)
		if got != c.want || off != c.off {
			t.Errorf("%s at %v: %q, %v; want %q, %v", c.raw, c.pos, got, off, c.want, c.off)
		}
	}
}
