package api

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// ui holds the console; ui/vendor/ (xterm.js, put there by `make build`
// through scripts/vendor-xterm.sh and not in git) may be missing from a
// plain go build, which the stubs below stand in for.
//
//go:embed ui
var uiFiles embed.FS

// uiCSP lets the console load only its own files and talk only to this
// sandboxd: no CDN, no inline script, no framing. Inline styles are
// allowed because xterm.js sizes and colours its rows through <style>
// elements it creates; the page never inserts markup it was sent.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// terminalMissing is what the console's terminal says when the binary was
// built without the vendored xterm.js.
const terminalMissing = "terminal unavailable: run make build (this sandboxd was built without the console's terminal emulator)"

// uiVendorStubs answer for the vendored files a plain go build lacks: the
// page loads, and its terminal explains itself instead of failing.
var uiVendorStubs = map[string]string{
	"vendor/xterm.js":     "window.sandboxdTerminalMissing = " + jsString(terminalMissing) + ";\n",
	"vendor/addon-fit.js": "/* not built: run make build */\n",
	"vendor/xterm.css":    "/* not built: run make build */\n",
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// uiHandler serves the web console's static files. The page holds no data;
// it calls the API with a token the person pastes, so it needs none itself.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return uiHandlerFS(sub)
}

// uiHandlerFS serves the console from sub (the embedded ui folder).
func uiHandlerFS(sub fs.FS) http.Handler {
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", uiCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(r.URL.Path, "/ui/")
		if stub, ok := uiVendorStubs[name]; ok {
			if _, err := fs.Stat(sub, name); err != nil {
				if path.Ext(name) == ".css" {
					h.Set("Content-Type", "text/css; charset=utf-8")
				} else {
					h.Set("Content-Type", "text/javascript; charset=utf-8")
				}
				w.Write([]byte(stub))
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}
