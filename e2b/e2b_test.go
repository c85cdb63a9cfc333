package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// fakeSandboxes knows sandboxes by id; what a test does not use panics.
type fakeSandboxes struct {
	Sandboxes
	mu       sync.Mutex
	boxes    map[string]sandbox.Info
	deleted  []string
	paused   []string
	expiries []string // the sandboxes whose expiry was set
}

func (f *fakeSandboxes) Get(_ context.Context, tenant, id string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; ok && b.Tenant == tenant {
		return b, nil
	}
	return sandbox.Info{}, errdefs.NotFound("sandbox %s not found", id)
}

func (f *fakeSandboxes) Delete(_ context.Context, tenant, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; !ok || b.Tenant != tenant {
		return errdefs.NotFound("sandbox %s not found", id)
	}
	delete(f.boxes, id)
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakeSandboxes) Pause(_ context.Context, tenant, id string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.boxes[id]
	b.State = sandbox.StatePaused
	f.boxes[id] = b
	f.paused = append(f.paused, id)
	return b, nil
}

func newTestHandler(t *testing.T, sb *fakeSandboxes, cfg Config) *Handler {
	t.Helper()
	a, _ := api.ParseTenantToken("acme", api.HashToken("tok-acme"))
	cfg.Auth, cfg.Sandboxes, cfg.DataDir = api.NewTokenAuth(a), sb, t.TempDir()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestAccessTokens(t *testing.T) {
	s, other := newSigner([]byte("k1")), newSigner([]byte("k2"))
	tok := s.token("acme", "abc123")
	if tenant, id, ok := s.verify(tok); !ok || tenant != "acme" || id != "abc123" {
		t.Fatalf("verify: %q %q %v", tenant, id, ok)
	}
	if _, _, ok := other.verify(tok); ok {
		t.Error("another deployment's key accepted the token")
	}
	forged := tokenPrefix + strings.TrimPrefix(s.token("evil", "abc123"), tokenPrefix)[:10] + tok[len(tokenPrefix)+10:]
	for _, bad := range []string{"", "e2b1.", tok + "x", strings.Replace(tok, "e2b1.", "e2b2.", 1), forged} {
		if _, _, ok := s.verify(bad); ok {
			t.Errorf("verify(%q) passed", bad)
		}
	}
}

func TestHostTarget(t *testing.T) {
	h := &Handler{cfg: Config{Domain: "e2b.example.com"}}
	for host, want := range map[string]string{
		"8000-abc123.e2b.example.com":      "8000 abc123",
		"8000-abc123.E2B.example.com:7788": "8000 abc123",
		"49983-x.e2b.example.com":          "49983 x",
		"abc123.e2b.example.com":           "",
		"0-abc.e2b.example.com":            "",
		"70000-abc.e2b.example.com":        "",
		"8000-abc.other.example.com":       "",
		"a.8000-abc.e2b.example.com":       "",
		"e2b.example.com":                  "",
	} {
		port, id, ok := h.hostTarget(host)
		got := ""
		if ok {
			got = strings.TrimSpace(strings.Join([]string{itoa(port), id}, " "))
		}
		if got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
	if (&Handler{}).Owns(httptest.NewRequest("GET", "http://8000-abc.e2b.example.com/", nil)) {
		t.Error("a handler without a domain claimed a host")
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestMetadataFilterUndoesTheSDKsEncoding(t *testing.T) {
	// The SDK encodes each key and value, joins them as a query string,
	// and that string is encoded once more as the parameter's value.
	inner := url.Values{url.QueryEscape("team name"): {url.QueryEscape("a&b=c")}, "k": {"v"}}.Encode()
	q, _ := url.ParseQuery("metadata=" + url.QueryEscape(inner))
	got, err := metadataFilter(q.Get("metadata"))
	if err != nil || len(got) != 2 || got["team name"] != "a&b=c" || got["k"] != "v" {
		t.Errorf("got %v, %v", got, err)
	}
	if !matches(map[string]string{"team name": "a&b=c", "k": "v", "x": "y"}, got) || matches(map[string]string{"k": "v"}, got) {
		t.Error("matches disagrees")
	}
}

func TestErrorsHaveE2BsShapeAndStatus(t *testing.T) {
	for err, want := range map[error]int{
		errdefs.InvalidArgument("x"): 400, errdefs.Unauthenticated("x"): 401, errdefs.NotFound("x"): 404,
		errdefs.Conflict("x"): 409, errdefs.FailedPrecondition("x"): 409, errdefs.ResourceExhausted("x"): 429,
		errdefs.Unavailable("x"): 503, errdefs.DeadlineExceeded("x"): 504, errdefs.Internal("x"): 500,
	} {
		if got := statusOf(err); got != want {
			t.Errorf("%v: %d, want %d", errdefs.Code(err), got, want)
		}
	}
	rec := httptest.NewRecorder()
	writeError(rec, 404, "sandbox x not found")
	var body map[string]any
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != 404 || body["code"] != float64(404) || body["message"] != "sandbox x not found" {
		t.Errorf("%d %v", rec.Code, body)
	}
}

func TestAuthAndFront(t *testing.T) {
	sb := &fakeSandboxes{boxes: map[string]sandbox.Info{"abc": {ID: "abc", Tenant: "acme", State: "running"}}}
	h := newTestHandler(t, sb, Config{})
	do := func(method, path string, hdr map[string]string) (int, map[string]any) {
		r := httptest.NewRequest(method, path, nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var body map[string]any
		json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	if code, body := do("GET", "/e2b/sandboxes/abc", nil); code != 401 || body["code"] != float64(401) {
		t.Errorf("no key: %d %v", code, body)
	}
	if code, _ := do("GET", "/e2b/sandboxes/abc", map[string]string{"X-API-KEY": "nope"}); code != 401 {
		t.Errorf("a bad key: %d", code)
	}
	for _, hdr := range []map[string]string{{"X-API-KEY": "tok-acme"}, {"Authorization": "Bearer tok-acme"}} {
		code, body := do("GET", "/e2b/sandboxes/abc", hdr)
		if code != 200 || body["sandboxID"] != "abc" || body["envdVersion"] == "" {
			t.Errorf("%v: %d %v", hdr, code, body)
		}
	}
	if code, body := do("GET", "/e2b/sandboxes/zzz", map[string]string{"X-API-KEY": "tok-acme"}); code != 404 || !strings.Contains(body["message"].(string), "zzz") {
		t.Errorf("another sandbox: %d %v", code, body)
	}
	if code, body := do("POST", "/e2b/templates", map[string]string{"X-API-KEY": "tok-acme"}); code != 404 || !strings.Contains(body["message"].(string), "not built") {
		t.Errorf("a template build: %d %v", code, body)
	}

	front := func(tok, id string) int {
		code, _ := do("GET", "/e2b/sandbox/health", map[string]string{"X-Access-Token": tok, "E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983"})
		return code
	}
	if got := front(h.sign.token("acme", "abc"), "abc"); got != http.StatusNoContent {
		t.Errorf("health with the sandbox's token: %d", got)
	}
	if got := front(h.sign.token("acme", "other"), "abc"); got != 401 {
		t.Errorf("another sandbox's token: %d", got)
	}
	if got := front("", "abc"); got != 401 {
		t.Errorf("no token: %d", got)
	}
	if code, _ := do("GET", "/e2b/sandbox/health", map[string]string{"X-Access-Token": h.sign.token("acme", "abc")}); code != 400 {
		t.Errorf("no sandbox headers: %d", code)
	}
	interp := map[string]string{"X-Access-Token": h.sign.token("acme", "abc"), "E2b-Sandbox-Id": "abc", "E2b-Sandbox-Port": "49999"}
	if code, body := do("POST", "/e2b/sandbox/execute", interp); code != 502 || !strings.Contains(body["message"].(string), "code interpreter") {
		t.Errorf("49999 without a handler: %d %v", code, body)
	}
}

type recordPort struct{ got []string }

func (p *recordPort) ServeSandbox(w http.ResponseWriter, r *http.Request, tenant, sandboxID string) {
	p.got = append(p.got, r.Method+" "+r.URL.Path+" "+tenant+" "+sandboxID)
	w.WriteHeader(http.StatusTeapot)
}

func TestPortHandlersGetTheInnerPath(t *testing.T) {
	sb := &fakeSandboxes{boxes: map[string]sandbox.Info{"abc": {ID: "abc", Tenant: "acme", State: "running"}}}
	p := &recordPort{}
	h := newTestHandler(t, sb, Config{Ports: map[int]PortHandler{49999: p}, Domain: "e2b.test"})
	tok := h.sign.token("acme", "abc")
	for _, r := range []*http.Request{
		httptest.NewRequest("POST", "/e2b/sandbox/execute", nil),
		httptest.NewRequest("GET", "http://49999-abc.e2b.test/contexts", nil),
		httptest.NewRequest("GET", "http://49999-abc.e2b.test/x", nil),
	} {
		r.Header.Set("E2b-Sandbox-Id", "abc")
		r.Header.Set("E2b-Sandbox-Port", "49999")
		if r.URL.Path != "/x" {
			r.Header.Set("X-Access-Token", tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if want := http.StatusTeapot; r.URL.Path != "/x" && rec.Code != want || r.URL.Path == "/x" && rec.Code != 401 {
			t.Errorf("%s %s: %d", r.Method, r.URL, rec.Code)
		}
	}
	if want := "POST /execute acme abc|GET /contexts acme abc"; strings.Join(p.got, "|") != want {
		t.Errorf("the handler saw %q, want %q", p.got, want)
	}
}

func (f *fakeSandboxes) SetExpiry(_ context.Context, tenant, id string, e sandbox.Expiry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.boxes[id]
	if !ok || b.Tenant != tenant {
		return errdefs.NotFound("sandbox %s not found", id)
	}
	b.Labels = maps.Clone(b.Labels)
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	b.Labels[sandbox.LabelExpiry] = sandbox.ExpiryLabels(sandbox.Spec{Expiry: e})[sandbox.LabelExpiry]
	if e.IsZero() {
		b.Labels[sandbox.LabelExpiry] = "{}"
	}
	f.boxes[id] = b
	f.expiries = append(f.expiries, id)
	return nil
}

// The records of a sandboxd from before: their timeouts move onto the
// sandboxes that have none of their own, once (the file is renamed), and
// their templates and metadata are still read for the sandboxes they name.
func TestOldRecordsAreMigrated(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	mine := sandbox.ExpiryLabels(sandbox.Spec{Expiry: sandbox.Expiry{At: future.Add(time.Hour), Then: sandbox.ExpireDelete}})
	sb := &fakeSandboxes{boxes: map[string]sandbox.Info{
		"old": {ID: "old", Tenant: "acme", State: "running"},
		"nap": {ID: "nap", Tenant: "acme", State: "running"},
		// Its expiry was set since: the old end is not brought back.
		"set": {ID: "set", Tenant: "acme", State: "running", Labels: mine},
		// Labelled at create: the label wins over the old record.
		"new": {ID: "new", Tenant: "acme", State: "running", Labels: map[string]string{labelE2B: `{"template":"mine"}`}},
	}}
	dir := t.TempDir()
	old := map[string]record{
		"old":  {Tenant: "acme", Template: "base", EndAt: future, Metadata: map[string]string{"k": "v"}},
		"nap":  {Tenant: "acme", Template: "base", EndAt: future, AutoPause: true, KeepMemory: false},
		"set":  {Tenant: "acme", Template: "base", EndAt: future},
		"new":  {Tenant: "acme", Template: "theirs", EndAt: future},
		"gone": {Tenant: "acme", Template: "base", EndAt: future},
	}
	b, _ := json.Marshal(old)
	if err := os.MkdirAll(filepath.Join(dir, "e2b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "e2b", legacyFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := api.ParseTenantToken("acme", api.HashToken("tok-acme"))
	start := func() *Handler {
		h, err := New(Config{Auth: api.NewTokenAuth(a), Sandboxes: sb, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		h.Close() // waits for the migration
		return h
	}
	h := start()
	if strings.Join(slices.Sorted(slices.Values(sb.expiries)), " ") != "nap old" {
		t.Fatalf("expiries set for %v; want nap and old", sb.expiries)
	}
	for id, want := range map[string]sandbox.Expiry{"old": {At: future, Then: sandbox.ExpireDelete}, "nap": {At: future, Then: sandbox.ExpireHibernate}} {
		got, _, err := sandbox.ExpiryOf(sb.boxes[id])
		if err != nil || !got.At.Equal(want.At) || got.Then != want.Then {
			t.Errorf("%s's expiry: %+v %v; want %+v", id, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "e2b", legacyFile)); !os.IsNotExist(err) {
		t.Errorf("the old file is still there to migrate: %v", err)
	}
	if rec := h.recordOf(sb.boxes["old"]); rec.Template != "base" || rec.Metadata["k"] != "v" || !rec.EndAt.Equal(future) {
		t.Errorf("the old sandbox's record: %+v", rec)
	}
	if rec := h.recordOf(sb.boxes["new"]); rec.Template != "mine" {
		t.Errorf("the labelled sandbox's record: %+v", rec)
	}
	// A pause clears the expiry; a restart does not bring the old one back.
	sb.SetExpiry(context.Background(), "acme", "old", sandbox.Expiry{})
	sb.expiries = nil
	h = start()
	if len(sb.expiries) != 0 || !h.recordOf(sb.boxes["old"]).EndAt.IsZero() || h.recordOf(sb.boxes["old"]).Template != "base" {
		t.Errorf("after a restart: expiries set for %v, record %+v", sb.expiries, h.recordOf(sb.boxes["old"]))
	}
}

// What E2B fixes at create round-trips through the label, and too much
// metadata is refused in E2B's terms.
func TestFixedLabel(t *testing.T) {
	f := fixed{Template: "base", Metadata: map[string]string{"a": "b"}, AutoPause: true, KeepMemory: true}
	l, err := f.label()
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{}
	got := h.recordOf(sandbox.Info{Tenant: "acme", Labels: l}).fixed()
	if got.Template != "base" || got.Metadata["a"] != "b" || !got.AutoPause || !got.KeepMemory || got.then() != sandbox.ExpirePause {
		t.Errorf("round trip: %+v", got)
	}
	big := fixed{Template: "base", Metadata: map[string]string{"k": strings.Repeat("x", sandbox.MaxLabelBytes)}}
	if _, err := big.label(); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("too much metadata: %v", err)
	}
}

func (f *fakeSandboxes) List(_ context.Context, tenant, _ string) ([]sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sandbox.Info
	for _, b := range f.boxes {
		if b.Tenant == tenant {
			out = append(out, b)
		}
	}
	return out, nil
}

func TestListFiltersAndPages(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 1, 1, 0, m, 0, 0, time.UTC) }
	sb := &fakeSandboxes{boxes: map[string]sandbox.Info{
		"s1": {ID: "s1", Tenant: "acme", State: "running", CreatedAt: at(1)},
		"s2": {ID: "s2", Tenant: "acme", State: "paused", CreatedAt: at(2)},
		"s3": {ID: "s3", Tenant: "acme", State: "hibernated", CreatedAt: at(3)},
		"s4": {ID: "s4", Tenant: "acme", State: "stopped", CreatedAt: at(4)},
		"x1": {ID: "x1", Tenant: "other", State: "running", CreatedAt: at(5)},
	}}
	team, _ := fixed{Metadata: map[string]string{"team": "a b"}}.label()
	for _, id := range []string{"s1", "s3"} {
		b := sb.boxes[id]
		b.Labels = team
		sb.boxes[id] = b
	}
	h := newTestHandler(t, sb, Config{})
	list := func(query string) ([]string, string) {
		r := httptest.NewRequest("GET", "/e2b/v2/sandboxes?"+query, nil)
		r.Header.Set("X-API-KEY", "tok-acme")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", query, rec.Code, rec.Body)
		}
		var out []struct{ SandboxID, State string }
		json.Unmarshal(rec.Body.Bytes(), &out)
		var ids []string
		for _, o := range out {
			ids = append(ids, o.SandboxID+":"+o.State)
		}
		return ids, rec.Header().Get("X-Next-Token")
	}
	if ids, next := list(""); strings.Join(ids, " ") != "s3:paused s2:paused s1:running" || next != "" {
		t.Errorf("all: %v next %q", ids, next)
	}
	if ids, next := list("limit=2"); strings.Join(ids, " ") != "s3:paused s2:paused" || next != "2" {
		t.Errorf("page 1: %v next %q", ids, next)
	}
	if ids, next := list("limit=2&nextToken=2&order=desc"); strings.Join(ids, " ") != "s1:running" || next != "" {
		t.Errorf("page 2: %v next %q", ids, next)
	}
	if ids, _ := list("state=running&order=asc"); strings.Join(ids, " ") != "s1:running" {
		t.Errorf("running: %v", ids)
	}
	meta := url.Values{"metadata": {url.Values{"team": {url.QueryEscape("a b")}}.Encode()}, "state": {"running,paused"}, "order": {"asc"}}
	if ids, _ := list(meta.Encode()); strings.Join(ids, " ") != "s1:running s3:paused" {
		t.Errorf("metadata team=a b: %v", ids)
	}
	after := url.Values{"startedAfter": {at(2).Format(time.RFC3339Nano)}}
	if ids, _ := list(after.Encode()); strings.Join(ids, " ") != "s3:paused s2:paused" {
		t.Errorf("started at or after minute 2: %v", ids)
	}
	for _, bad := range []string{"limit=0", "limit=101", "state=gone", "nextToken=x", "startedAfter=yesterday"} {
		r := httptest.NewRequest("GET", "/e2b/v2/sandboxes?"+bad, nil)
		r.Header.Set("X-API-KEY", "tok-acme")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != 400 {
			t.Errorf("%s: %d", bad, rec.Code)
		}
	}
}

func TestMetricsRange(t *testing.T) {
	// A sample read at 1003.4 stands for the bucket 1000 to 1005.
	at := bucketOf(time.Unix(1003, 400_000_000))
	if at.Unix() != 1000 {
		t.Fatalf("bucket of 1003.4 s starts at %d, want 1000", at.Unix())
	}
	for q, want := range map[string]bool{
		"": true, "start=1000": true, "end=1000": true, "start=999&end=1001": true, "start=1004": true,
		"start=1005": false, "end=999": false, "start=0&end=10": false,
	} {
		v, _ := url.ParseQuery(q)
		within, err := metricsRange(v)
		if err != nil || within(at) != want {
			t.Errorf("%q: %v %v, want %v", q, within != nil && within(at), err, want)
		}
	}
	for _, bad := range []string{"start=soon", "end=-1", "start=1.5"} {
		v, _ := url.ParseQuery(bad)
		if _, err := metricsRange(v); err == nil || !strings.Contains(err.Error(), "Unix time in seconds") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestTemplateAliasAnswersConfiguredTemplates(t *testing.T) {
	h := newTestHandler(t, &fakeSandboxes{}, Config{Templates: map[string]string{"base": "img"}})
	get := func(alias string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/e2b/templates/aliases/"+alias, nil)
		r.Header.Set("X-API-KEY", "tok-acme")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	if rec := get("base"); rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"templateID":"base","public":true}` {
		t.Errorf("base: %d %s", rec.Code, rec.Body)
	}
	rec := get("nope")
	var body struct {
		Code    int
		Message string
	}
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != 404 || body.Code != 404 || !strings.Contains(body.Message, `template "nope" not found`) {
		t.Errorf("nope: %d %s", rec.Code, rec.Body)
	}
}

func TestNetworkRulesAreHeaders(t *testing.T) {
	hs, err := rulesOf(json.RawMessage(`{"b.test":[{"transform":{"headers":{"X-B":"2","X-A":"1"}}},{}],"a.test":[{"transform":{"headers":{"X-C":"3"}}}]}`))
	want := []sandbox.EgressHeader{{Host: "a.test", Name: "X-C", Value: "3"}, {Host: "b.test", Name: "X-A", Value: "1"}, {Host: "b.test", Name: "X-B", Value: "2"}}
	if err != nil || !slices.Equal(hs, want) {
		t.Fatalf("rulesOf = %v %v, want %v", hs, err, want)
	}
	if hs, err := rulesOf(nil); hs != nil || err != nil {
		t.Errorf("no rules: %v %v", hs, err)
	}
	for raw, wantErr := range map[string]string{
		`{"a.test":[{"match":{}}]}`:                      `has "match"`,
		`{"a.test":[{"transform":{"body":"x"}}]}`:        `has "body"`,
		`{"a.test":[{"transform":{"headers":{"X":1}}}]}`: "of strings",
		`["a.test"]`: "is not {host:",
	} {
		if _, err := rulesOf(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: %v, want %q", raw, err, wantErr)
		}
	}
}
