package cluster

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSignedForwardsAreCheckedWhole(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	a, _ := NewSigner(key, "sd-0")
	b, _ := NewSigner(key, "sd-1")
	c, _ := NewSigner(key, "sd-2")
	other, _ := NewSigner([]byte(strings.Repeat("x", 32)), "sd-0")

	req := func() *httptestRequest {
		return &httptestRequest{httptest.NewRequest("POST", "/v1/runs/run_1/tools/read", nil)}
	}

	r := req()
	a.Sign(r.Request, "sd-1")
	if fwd, err := b.Verify(r.Request); !fwd || err != nil {
		t.Fatalf("a request signed for sd-1 is refused by sd-1: %v", err)
	}
	if fwd, err := c.Verify(r.Request); !fwd || err == nil || !strings.Contains(err.Error(), "meant for replica") {
		t.Fatalf("a request signed for sd-1 is accepted by sd-2 (%v)", err)
	}
	if fwd, err := b.Verify(req().Request); fwd || err != nil {
		t.Fatalf("a plain request counts as forwarded (%v, %v)", fwd, err)
	}

	r = req()
	other.Sign(r.Request, "sd-1")
	if _, err := b.Verify(r.Request); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("a request signed with another key is accepted (%v)", err)
	}

	r = req()
	a.Sign(r.Request, "sd-1")
	r.URL.Path = "/v1/runs/run_2/tools/read"
	r.RequestURI = r.URL.RequestURI()
	if _, err := b.Verify(r.Request); err == nil {
		t.Fatal("a signature for one path is accepted for another")
	}

	old := a.now
	a.now = func() time.Time { return old().Add(-2 * forwardWindow) }
	r = req()
	a.Sign(r.Request, "sd-1")
	if _, err := b.Verify(r.Request); err == nil || !strings.Contains(err.Error(), "window") {
		t.Fatalf("a stale forwarded request is accepted (%v)", err)
	}

	r = req()
	r.Header.Set(HeaderForwardedBy, "sd-0")
	if fwd, err := b.Verify(r.Request); !fwd || err == nil {
		t.Fatalf("a half-forged request (headers without signature) is accepted (%v, %v)", fwd, err)
	}

	if _, err := NewSigner([]byte("short"), "sd-0"); err == nil {
		t.Fatal("a 5-byte peer secret is accepted")
	}
}

type httptestRequest struct{ *http.Request }
