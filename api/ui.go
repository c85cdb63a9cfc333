package api

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed ui
var uiFiles embed.FS

// uiHandler serves the web console's static files. The page holds no data;
// it calls the API with a token the person pastes, so it needs none itself.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.StripPrefix("/ui/", http.FileServerFS(sub))
}
