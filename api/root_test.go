package api

import (
	"net/http"
	"testing"
)

// TestRootRedirectsToConsole: GET and HEAD of exactly "/" send a browser to
// the console; other methods on "/" and every other unknown path still get
// the JSON 404 that names the endpoint.
func TestRootRedirectsToConsole(t *testing.T) {
	h := newHarness(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(method, h.http.URL+"/", nil)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
			t.Errorf("%s /: %d Location %q, want 302 to /ui/", method, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// Following the redirect lands on the console page.
	if a := h.do("GET", "/", "", ""); a.status != 200 || a.header.Get("Content-Type") == "application/json" {
		t.Errorf("GET / followed: %d %s, want the console page", a.status, a.header.Get("Content-Type"))
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/"}, {"DELETE", "/"}, {"GET", "/nope"}, {"GET", "/v1"}, {"GET", "/index.html"},
	} {
		a := h.do(c.method, c.path, "", "")
		if a.status != http.StatusNotFound {
			t.Errorf("%s %s: %d, want the JSON 404", c.method, c.path, a.status)
			continue
		}
		if e := a.errBody(t); e.Code != "not_found" {
			t.Errorf("%s %s: code %q, want not_found", c.method, c.path, e.Code)
		}
	}
}
