package api

import (
	"io/fs"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

// A plain go build has no vendored xterm.js: the console still loads, and
// its terminal script says what to do instead of answering 404.
func TestConsoleServesTerminalStubWithoutVendoredXterm(t *testing.T) {
	bare := fstest.MapFS{"index.html": {Data: []byte("<h1>sandboxd</h1>")}}
	built := fstest.MapFS{"index.html": bare["index.html"], "vendor/xterm.js": {Data: []byte("/* xterm */")}}
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		path string
		want string
		ct   string
	}{
		// The name terminal.js reads the sentence from.
		{"stub", bare, "/ui/vendor/xterm.js", `window.sandboxdTerminalMissing = "terminal unavailable: run make build`, "text/javascript"},
		{"stub css", bare, "/ui/vendor/xterm.css", "run make build", "text/css"},
		{"vendored", built, "/ui/vendor/xterm.js", "/* xterm */", "text/javascript"},
	} {
		rec := httptest.NewRecorder()
		uiHandlerFS(c.fsys).ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), c.want) || !strings.HasPrefix(rec.Header().Get("Content-Type"), c.ct) {
			t.Errorf("%s: GET %s = %d %q %q, want %q as %s", c.name, c.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), c.want, c.ct)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no Content-Security-Policy", c.name)
		}
	}
	rec := httptest.NewRecorder()
	uiHandlerFS(bare).ServeHTTP(rec, httptest.NewRequest("GET", "/ui/vendor/other.js", nil))
	if rec.Code != 404 {
		t.Errorf("an unknown vendored file: %d, want 404", rec.Code)
	}
}

// The console shows values that tenants chose (run ids from request paths,
// conversations, questions): its scripts build elements and set their
// text, and never hand a string to the HTML parser.
func TestConsoleScriptsInsertNoMarkup(t *testing.T) {
	names, err := fs.Glob(uiFiles, "ui/*.js")
	if err != nil || len(names) < 4 {
		t.Fatalf("the console's scripts: %v %v", names, err)
	}
	parsers := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "DOMParser", "srcdoc"}
	for _, n := range names {
		b, err := fs.ReadFile(uiFiles, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parsers {
			if strings.Contains(string(b), p) {
				t.Errorf("%s uses %s: build the nodes and set textContent instead", n, p)
			}
		}
	}
}
