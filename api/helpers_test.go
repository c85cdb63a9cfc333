package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func newTestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}
