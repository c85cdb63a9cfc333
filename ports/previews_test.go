package ports

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/events"
	"github.com/sandboxd/sandboxd/sandbox"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newService(t *testing.T, dir string, o Options) (*Service, *clock) {
	t.Helper()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	o.DataDir, o.Now = dir, clk.Now
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

var boxA = sandbox.Info{ID: "sbx-a", Tenant: "acme", Conversation: "c1"}
var boxB = sandbox.Info{ID: "sbx-b", Tenant: "acme", Conversation: "c2"}

// located is the request a browser makes with the link.
func located(t *testing.T, link, domain string) Located {
	t.Helper()
	r := httptest.NewRequest("GET", link, nil)
	l, ok := Locate(r, domain)
	if !ok {
		t.Fatalf("%s is not located as a preview", link)
	}
	return l
}

func TestPreviewLifecycle(t *testing.T) {
	dir := t.TempDir()
	s, clk := newService(t, dir, Options{})
	ctx := context.Background()
	p, err := s.Create(ctx, boxA, 3000, 0, "http://sandboxd:8080")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.URL, "http://sandboxd:8080/p/") || !strings.HasSuffix(p.URL, "/") || p.Port != 3000 || !validID(p.ID) {
		t.Fatalf("preview %+v", p)
	}
	if got := p.ExpiresAt.Sub(clk.Now()); got != time.Hour {
		t.Fatalf("default lifetime %v; want 1h", got)
	}
	c, err := s.Verify(located(t, p.URL+"index.html", ""))
	if err != nil || c.Sandbox != boxA.ID || c.Port != 3000 || c.Tenant != "acme" {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	if l := s.List(ctx, boxA, "http://x"); len(l) != 1 || l[0].ID != p.ID {
		t.Fatalf("List = %+v", l)
	}
	if l := s.List(ctx, boxB, "http://x"); len(l) != 0 {
		t.Fatalf("another sandbox lists %+v", l)
	}

	cut, done := s.Cut(c)
	if err := s.Revoke(ctx, boxB, p.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("revoking A's preview through B: %v; want not found", err)
	}
	// The request in flight ends a little after its cut; the revocation
	// answers only once it has.
	var ended atomic.Bool
	go func() {
		<-cut
		time.Sleep(20 * time.Millisecond)
		ended.Store(true)
		done()
	}()
	if err := s.Revoke(ctx, boxA, p.ID); err != nil {
		t.Fatal(err)
	}
	if !ended.Load() {
		t.Fatal("the revocation answered before the request it cut had ended")
	}
	_, err = s.Verify(located(t, p.URL, ""))
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a revoked link: %v; want a refusal saying revoked", err)
	}
	if l := s.List(ctx, boxA, "http://x"); len(l) != 0 {
		t.Fatalf("a revoked preview is still listed: %+v", l)
	}

	// A restart keeps the revocation.
	s2, clk2 := newService(t, dir, Options{})
	clk2.now = clk.Now()
	if _, err := s2.Verify(located(t, p.URL, "")); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("after a restart the revoked link: %v; want refused as revoked", err)
	}

	// Expiry.
	q, err := s2.Create(ctx, boxA, 3000, 90*time.Second, "http://x")
	if err != nil {
		t.Fatal(err)
	}
	clk2.add(91 * time.Second)
	if _, err := s2.Verify(located(t, q.URL, "")); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired link: %v; want refused as expired", err)
	}
}

func TestPreviewRefusesAlteredAndForeignLinks(t *testing.T) {
	s, _ := newService(t, t.TempDir(), Options{})
	other, _ := newService(t, t.TempDir(), Options{})
	ctx := context.Background()
	p, err := s.Create(ctx, boxA, 3000, 0, "http://x")
	if err != nil {
		t.Fatal(err)
	}
	tok := located(t, p.URL, "").Token
	c, _ := Peek(tok)

	// The same claims for sandbox B or port 3001, signed by nobody: the
	// payload changed, the signature did not.
	for _, alter := range []func(*Claims){
		func(c *Claims) { c.Sandbox = boxB.ID },
		func(c *Claims) { c.Port = 3001 },
		func(c *Claims) { c.Expires += 3600 },
	} {
		c2 := c
		alter(&c2)
		forged := other.signer.sign(c2) // signed, but with another key
		_, sig, _ := strings.Cut(tok[len(tokenPrefix):], ".")
		payload, _, _ := strings.Cut(forged[len(tokenPrefix):], ".")
		for _, f := range []string{forged, tokenPrefix + payload + "." + sig} {
			if got, err := s.Verify(Located{Token: f}); !errors.Is(err, ErrDenied) {
				t.Errorf("an altered link (%+v) was taken: %+v", c2, got)
			}
		}
	}
	if _, err := s.Verify(Located{Token: tok[:len(tok)-2]}); !errors.Is(err, ErrDenied) {
		t.Error("a link cut short was taken")
	}
	if _, err := s.Verify(Located{}); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "needs its link") {
		t.Errorf("a request without a token: %v", err)
	}
}

func TestHostPreview(t *testing.T) {
	s, _ := newService(t, t.TempDir(), Options{Domain: "preview.example.com"})
	ctx := context.Background()
	p, err := s.Create(ctx, boxA, 5173, 0, "https://sandboxd.example.com:8443")
	if err != nil {
		t.Fatal(err)
	}
	want := "https://5173-" + p.ID + ".preview.example.com:8443/?" + CookieName + "="
	if !strings.HasPrefix(p.URL, want) {
		t.Fatalf("url %s; want it to start %s", p.URL, want)
	}
	l := located(t, p.URL, "preview.example.com")
	if !l.Host || !l.FromQuery || l.HostPort != 5173 || l.HostID != p.ID || l.Path != "/" {
		t.Fatalf("located %+v", l)
	}
	if _, err := s.Verify(l); err != nil {
		t.Fatal(err)
	}
	// The cookie of one preview's host shown at another port's host.
	r := httptest.NewRequest("GET", "https://3000-"+p.ID+".preview.example.com/app.js", nil)
	r.Header.Set("Cookie", CookieName+"="+l.Token)
	l2, ok := Locate(r, "preview.example.com")
	if !ok || l2.FromQuery || l2.Token != l.Token || l2.Path != "/app.js" {
		t.Fatalf("located %+v %v", l2, ok)
	}
	if _, err := s.Verify(l2); !errors.Is(err, ErrDenied) {
		t.Fatal("a link was taken at another port's host")
	}
	// SandboxOf routes by the cookie.
	r.Host = "5173-" + p.ID + ".preview.example.com"
	if c, ok := SandboxOf(r, "preview.example.com"); !ok || c.Sandbox != boxA.ID {
		t.Fatalf("SandboxOf = %+v %v", c, ok)
	}
	for _, host := range []string{"preview.example.com", "x.5173-" + p.ID + ".preview.example.com", "5173-nope.preview.example.com", "99999-" + p.ID + ".preview.example.com"} {
		if _, ok := Locate(httptest.NewRequest("GET", "https://"+host+"/", nil), "preview.example.com"); ok {
			t.Errorf("host %s was taken for a preview", host)
		}
	}
}

func TestPreviewTTLAndCap(t *testing.T) {
	s, _ := newService(t, t.TempDir(), Options{DefaultTTL: time.Minute, MaxTTL: time.Hour})
	ctx := context.Background()
	if _, err := s.Create(ctx, boxA, 3000, 2*time.Hour, "http://x"); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "3600") {
		t.Fatalf("ttl over the max: %v", err)
	}
	for _, port := range []int{0, 65536, -1} {
		if _, err := s.Create(ctx, boxA, port, 0, "http://x"); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "1–65535") {
			t.Fatalf("port %d: %v", port, err)
		}
	}
	for i := range MaxPerSandbox {
		if _, err := s.Create(ctx, boxA, 3000+i, 0, "http://x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, boxA, 3000, 0, "http://x"); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("preview %d: %v; want the cap", MaxPerSandbox+1, err)
	}
	if _, err := s.Create(ctx, boxB, 3000, 0, "http://x"); err != nil {
		t.Fatalf("another sandbox is capped too: %v", err)
	}
}

// Where the backend annotates (Kubernetes), a revocation made by one
// replica is seen by another that reads the sandbox.
func TestRevocationTravelsOnTheAnnotation(t *testing.T) {
	var mu sync.Mutex
	labels := map[string]string{}
	annotate := func(_ context.Context, _ sandbox.Info, k, v string) error {
		mu.Lock()
		labels[k] = v
		mu.Unlock()
		return nil
	}
	secret := []byte(strings.Repeat("k", 32))
	a, _ := newService(t, t.TempDir(), Options{Secret: secret, Annotate: annotate})
	b, clkB := newService(t, t.TempDir(), Options{Secret: secret, Annotate: annotate})
	ctx := context.Background()
	p, err := a.Create(ctx, boxA, 3000, 0, "http://x")
	if err != nil {
		t.Fatal(err)
	}
	info := boxA
	mu.Lock()
	info.Labels = map[string]string{LabelPreviews: labels[LabelPreviews]}
	mu.Unlock()
	if l := b.List(ctx, info, "http://x"); len(l) != 1 || l[0].ID != p.ID {
		t.Fatalf("the other replica lists %+v", l)
	}
	if err := a.Revoke(ctx, info, p.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	info.Labels = map[string]string{LabelPreviews: labels[LabelPreviews]}
	mu.Unlock()
	_ = clkB
	c, err := b.Verify(located(t, p.URL, ""))
	if err != nil {
		t.Fatalf("the other replica refused the link before reading the sandbox: %v", err)
	}
	if err := b.Check(c, info); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("the other replica's check after the revocation: %v", err)
	}
}

type eventLog struct{ got []events.Event }

func (e *eventLog) Emit(ev events.Event) { e.got = append(e.got, ev) }

func TestPreviewsMadeAndRevokedAreEvents(t *testing.T) {
	evs := &eventLog{}
	s, _ := newService(t, t.TempDir(), Options{Events: evs})
	ctx := context.Background()
	p, err := s.Create(ctx, boxA, 3000, 0, "http://x")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // revoking twice is one revocation
		if err := s.Revoke(ctx, boxA, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, boxA, 0, 0, "http://x"); err == nil {
		t.Fatal("port 0 was accepted")
	}
	if len(evs.got) != 2 || evs.got[0].Type != events.PreviewCreated || evs.got[1].Type != events.PreviewRevoked {
		t.Fatalf("events %+v; want preview.created then preview.revoked", evs.got)
	}
	for _, ev := range evs.got {
		if ev.Preview != p.ID || ev.Sandbox != boxA.ID || ev.Tenant != "acme" || ev.Conversation != "c1" || ev.Target != "port 3000" {
			t.Errorf("event %+v does not name the preview, its sandbox and port", ev)
		}
	}
}
