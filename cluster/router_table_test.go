package cluster

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxd/sandboxd/api"
)

var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// samplePath is a path r's pattern matches, the run or sandbox id of the
// test in {id} and "x" in every other wildcard.
func samplePath(r api.Route, id string) string {
	if r.Path == "/" {
		return "/no/such/route"
	}
	p := strings.ReplaceAll(r.Path, "{$}", "")
	p = strings.ReplaceAll(p, "{id}", id)
	return wildcard.ReplaceAllString(p, "x")
}

func methodOf(r api.Route) string {
	if r.Method == "" {
		return http.MethodGet
	}
	return r.Method
}

// Every route of the API's table that belongs to a conversation reaches
// the replica that owns the conversation, through another replica; every
// route that belongs to none is served where it arrives.
func TestEveryScopedRouteReachesItsOwner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	k := Key{Tenant: "a", Conversation: "c1"}
	runs := fakeRuns{"run_1": {ID: "run_1", Tenant: "a", Conversation: "c1"}}
	sandboxes := func(_ context.Context, id string) (Key, bool) { return k, id == "sb_1" }
	a := newRouterReplicaWith(t, ctx, cs, "sd-0", runs, sandboxes)
	b := newRouterReplicaWith(t, ctx, cs, "sd-1", runs, sandboxes)
	if code, _, body := post(t, a.srv.URL+"/v1/runs/run_1/tools/read", `{}`); code != 200 || !strings.Contains(body, "served by sd-0") {
		t.Fatalf("a taking the conversation: %d %s", code, body)
	}
	eventually(t, "b's informer seeing a's lease", func() bool { return b.owners.HeldBy(k, "sd-0") })

	seen := map[api.Scope]int{}
	for _, r := range api.Routes() {
		path, body, want := samplePath(r, ""), "", "served by sd-1 forwarded=false"
		switch r.Scope {
		case api.ScopeRun:
			path, want = samplePath(r, "run_1"), "served by sd-0 forwarded=true"
		case api.ScopeSandbox:
			path, want = samplePath(r, "sb_1"), "served by sd-0 forwarded=true"
		case api.ScopeSandboxHeader:
			want = "served by sd-0 forwarded=true"
		case api.ScopeBody:
			body, want = `{"conversation":"c1"}`, "served by sd-0 forwarded=true"
		case api.ScopeNone:
		default:
			continue // questions are gathered from every replica: questions_test.go
		}
		seen[r.Scope]++
		req, err := http.NewRequestWithContext(ctx, methodOf(r), b.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if r.Scope == api.ScopeSandboxHeader {
			req.Header.Set(api.SandboxHeader, "sb_1")
		}
		req.Header.Set("Authorization", "Bearer "+humanToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if !strings.Contains(string(got), want) {
			t.Errorf("%s %s (%s, routed %s) at sd-1: %d %q; want %q", req.Method, path, r.ID, r.Scope, resp.StatusCode, got, want)
		}
	}
	for _, s := range []api.Scope{api.ScopeRun, api.ScopeSandbox, api.ScopeBody, api.ScopeNone, api.ScopeSandboxHeader} {
		if seen[s] == 0 {
			t.Errorf("the table has no route routed %s; the walk checked nothing of it", s)
		}
	}
}

// The router routes every route of the table at the route's own pattern:
// none is left to its catch-all.
func TestRouterHasEveryRoute(t *testing.T) {
	rt := NewRouter(http.NotFoundHandler(), RouterOptions{})
	for _, r := range api.Routes() {
		req, err := http.NewRequest(methodOf(r), samplePath(r, "x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := rt.mux.Handler(req); got != r.Pattern() {
			t.Errorf("%s %s (%s) reaches the router's pattern %q, not its route %q", req.Method, req.URL.Path, r.ID, got, r.Pattern())
		}
	}
}

// A route without a scope, with a scope the router does not know, or
// whose path lacks what its scope reads, is refused by name.
func TestRouterRefusesRoutesItCannotRoute(t *testing.T) {
	rt := &Router{next: http.NotFoundHandler()}
	good := api.Routes()
	for name, tc := range map[string]struct {
		r    api.Route
		want string
	}{
		"no scope":       {api.Route{Method: "GET", Path: "/v1/runs/{id}/logs", ID: "runLogs"}, "has no scope"},
		"unknown scope":  {api.Route{Method: "GET", Path: "/v1/things", ID: "things", Scope: api.Scope(99)}, "unknown scope 99"},
		"run without id": {api.Route{Method: "GET", Path: "/v1/runs", ID: "runsAgain", Scope: api.ScopeRun}, "has no {id}"},
		"space without space": {api.Route{Method: "GET", Path: "/v1/spaces", ID: "spaces", Scope: api.ScopeSpace},
			"has no {space}"},
	} {
		_, err := rt.routeMux(append(append([]api.Route(nil), good...), tc.r))
		if err == nil || !strings.Contains(err.Error(), tc.r.Pattern()) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: routeMux says %v; want it to name %q and say %q", name, err, tc.r.Pattern(), tc.want)
		}
	}
	if _, err := rt.routeMux(good); err != nil {
		t.Errorf("the API's own table: %v", err)
	}
}
