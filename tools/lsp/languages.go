package lsp

import (
	"path"
	"strings"
)

// Language is one language server as the supervisor starts it.
type Language struct {
	Name string
	// Commands are tried in order; the first whose binary exists runs
	// (pyright, else pylsp).
	Commands    [][]string
	Extensions  []string
	RootMarkers []string
	// LanguageIDs maps an extension to its LSP languageId; missing ones use
	// DefaultID.
	LanguageIDs map[string]string
	DefaultID   string
	// Env is added to the server's environment.
	Env map[string]string
	// InitOptions is sent as initializationOptions.
	InitOptions any
	// Checker is the project-wide check for `diagnostics "*"`, run in the
	// root; nil means the published diagnostics are all there is.
	Checker []string
	// Quiet is how long a write waits after the last publish for another
	// (gopls publishes type errors first and analysis a moment later).
	Quiet int // milliseconds
	// RootHint says how to make a root marker, for the error when a file
	// has none above it; empty gives a generic error message.
	RootHint string
	// SDK, when set, names what provides the server's binary, for the
	// message when it is missing (the Dart SDK is not in the sandbox image).
	SDK string
}

// languageID is the languageId of a file with this extension.
func (l *Language) languageID(file string) string {
	if id, ok := l.LanguageIDs[path.Ext(file)]; ok {
		return id
	}
	return l.DefaultID
}

// DefaultLanguages are the servers of DESIGN.md §4 "lsp".
func DefaultLanguages() []*Language {
	return []*Language{
		{
			Name: "go", Commands: [][]string{{"gopls"}}, Extensions: []string{".go"}, RootMarkers: []string{"go.mod"},
			DefaultID: "go",
			// No network in a sandbox: never try to download a toolchain or
			// module, and keep telemetry prompts away.
			Env: map[string]string{"GOPROXY": "off", "GOTOOLCHAIN": "local", "GOTELEMETRY": "off"},
			// gopls publishes type errors at once and its analyzers'
			// findings after diagnosticsDelay (1 s by default): two
			// publishes per change. With no delay it publishes once, a few
			// milliseconds after the change; the quiet period still covers
			// a second publish should one come.
			InitOptions: map[string]any{"diagnosticsDelay": "0s"},
			Checker:     []string{"go", "vet", "./..."},
			Quiet:       150,
			RootHint:    "create one with `go mod init <module path>`",
		},
		{
			Name:       "python",
			Commands:   [][]string{{"pyright-langserver", "--stdio"}, {"pylsp"}},
			Extensions: []string{".py", ".pyi"}, RootMarkers: []string{"pyproject.toml", "setup.py", "setup.cfg", "requirements.txt"},
			DefaultID: "python",
			Checker:   []string{"pyright"},
			Quiet:     300,
			RootHint:  "create a pyproject.toml (or a requirements.txt) at the project's top",
		},
		{
			Name: "typescript", Commands: [][]string{{"typescript-language-server", "--stdio"}},
			Extensions:  []string{".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts"},
			RootMarkers: []string{"tsconfig.json", "package.json"},
			LanguageIDs: map[string]string{".tsx": "typescriptreact", ".js": "javascript", ".jsx": "javascriptreact", ".mjs": "javascript", ".cjs": "javascript"},
			DefaultID:   "typescript",
			// Without this, requests during the project load are handled by
			// tsserver's syntax-only server: a definition then stops at the
			// import line, a response that looks right and is not.
			InitOptions: map[string]any{"tsserver": map[string]any{"useSyntaxServer": "never"}},
			Checker:     []string{"tsc", "--noEmit", "-p", "."},
			// Publishes are unversioned and come per check kind (syntax,
			// then semantic, then suggestions): wait out the whole series.
			Quiet:    1000,
			RootHint: "create a tsconfig.json (`npx tsc --init`) or a package.json (`npm init -y`) at the project's top",
		},
		{
			Name: "c", Commands: [][]string{{"clangd"}, {"clangd-16"}},
			Extensions:  []string{".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"},
			RootMarkers: []string{"compile_commands.json", "CMakeLists.txt"},
			LanguageIDs: map[string]string{".c": "c", ".h": "c"},
			DefaultID:   "cpp",
			Quiet:       300,
			RootHint: "generate a compile_commands.json at the project's top (e.g. `bear -- make`, or `cmake -B build -DCMAKE_EXPORT_COMPILE_COMMANDS=ON` " +
				"and copy build/compile_commands.json up) or add a CMakeLists.txt",
		},
		{
			Name: "rust", Commands: [][]string{{"rust-analyzer"}}, Extensions: []string{".rs"}, RootMarkers: []string{"Cargo.toml"},
			DefaultID: "rust", Checker: []string{"cargo", "check", "--quiet"}, Quiet: 400,
			RootHint: "create one with `cargo init`",
		},
		{
			Name: "dart", Commands: [][]string{{"dart", "language-server"}}, Extensions: []string{".dart"}, RootMarkers: []string{"pubspec.yaml"},
			DefaultID: "dart", Checker: []string{"dart", "analyze"}, Quiet: 300,
			RootHint: "create a pubspec.yaml at the package's top (`dart create` makes one)",
			SDK:      "the Dart SDK (for `dart language-server`)",
		},
	}
}

// languages is the table the supervisor consults.
type languages []*Language

func (ls languages) forFile(file string) *Language {
	ext := path.Ext(file)
	for _, l := range ls {
		for _, e := range l.Extensions {
			if e == ext {
				return l
			}
		}
	}
	return nil
}

func (ls languages) extensions() string {
	var all []string
	for _, l := range ls {
		all = append(all, l.Name+" ("+strings.Join(l.Extensions, " ")+")")
	}
	return strings.Join(all, ", ")
}

// merge returns defaults with extra added; an extra language replaces a
// default of the same name.
func merge(defaults, extra []*Language) languages {
	out := languages{}
	for _, d := range defaults {
		replaced := false
		for _, e := range extra {
			if e.Name == d.Name {
				replaced = true
			}
		}
		if !replaced {
			out = append(out, d)
		}
	}
	return append(out, extra...)
}
