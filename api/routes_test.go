package api

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/api/openapi"
)

// checkTable returns what is wrong with a route table: a route without a
// scope, or whose path or body lacks what its scope finds the
// conversation by, a run's route not routed by its run, and duplicates.
func checkTable(tab []route) []error {
	var errs []error
	bad := func(rt route, format string, args ...any) {
		errs = append(errs, fmt.Errorf("route %q (%s): %s", rt.public().Pattern(), rt.ID, fmt.Sprintf(format, args...)))
	}
	patterns, ids := map[string]bool{}, map[string]bool{}
	for _, rt := range tab {
		p := rt.public().Pattern()
		if patterns[p] || ids[rt.ID] {
			bad(rt, "is in the table twice")
		}
		patterns[p], ids[rt.ID] = true, true
		if rt.serve == nil {
			bad(rt, "has no handler")
		}
		if !rt.scope.known() {
			bad(rt, "has %s; say how a replica finds its conversation (ScopeNone when it has none)", rt.scope)
			continue
		}
		param := map[Scope]string{ScopeRun: "id", ScopeSandbox: "id", ScopeQuestion: "id", ScopeSpace: "space"}[rt.scope]
		if param != "" && !strings.Contains(rt.Path, "{"+param+"}") {
			bad(rt, "is routed %s but its path has no {%s}", rt.scope, param)
		}
		if strings.HasPrefix(rt.Path, "/v1/runs/{id}") && rt.scope != ScopeRun {
			bad(rt, "is a run's route but routed %s; a run's calls, MCP sessions and call log live at the replica owning its conversation", rt.scope)
		}
		if rt.scope == ScopeBody && (rt.Method != http.MethodPost || !hasJSONField(rt.Body, "conversation")) {
			bad(rt, "is routed by its body, which must be a POST body with a \"conversation\" field")
		}
	}
	return errs
}

// hasJSONField reports whether v is a struct with a field named name in
// JSON.
func hasJSONField(v any, name string) bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag == name {
			return true
		}
	}
	return false
}

func TestRouteTable(t *testing.T) {
	tab := routeTable()
	for _, err := range checkTable(tab) {
		t.Error(err)
	}
	scoped := map[Scope]int{}
	for _, rt := range Routes() {
		scoped[rt.Scope]++
	}
	for _, s := range []Scope{ScopeNone, ScopeRun, ScopeSandbox, ScopeBody, ScopeSpace, ScopeQuestion} {
		if scoped[s] == 0 {
			t.Errorf("no route is routed %s; the table lost its routes", s)
		}
	}

	// The mux serves every route of the table at the route's own pattern
	// (a server with every optional route: /metrics needs a gatherer, the
	// E2B API a handler).
	e2b := WithE2B(func(*Server) http.Handler { return http.NotFoundHandler() }, nil)
	mux := newHarness(t, WithGatherer(prometheus.NewRegistry()), e2b).srv.routes()
	for _, rt := range Routes() {
		req, err := http.NewRequest(cmpOr(rt.Method, "GET"), samplePath(rt), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := mux.Handler(req); got != rt.Pattern() {
			t.Errorf("%s %s is served by pattern %q, not by its route %q", req.Method, req.URL.Path, got, rt.Pattern())
		}
	}
}

// samplePath is a path rt's pattern matches: each {wildcard} a segment.
func samplePath(rt Route) string {
	if rt.Path == "/" {
		return "/no/such/route"
	}
	return contractWildcard.ReplaceAllStringFunc(strings.ReplaceAll(rt.Path, "{$}", ""), func(string) string { return "x" })
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// The table check catches a route that forgot its scope, and a scope that
// cannot find its conversation.
func TestRouteTableCheckCatchesMistakes(t *testing.T) {
	serve := authed((*Server).whoami)
	for name, tc := range map[string]struct {
		rt   route
		want string
	}{
		"no scope": {route{serve: serve, Route: openapi.Route{Method: "GET", Path: "/v1/things", ID: "things"}},
			"has no scope"},
		"unknown scope": {route{scope: Scope(99), serve: serve, Route: openapi.Route{Method: "GET", Path: "/v1/things", ID: "things"}},
			"unknown scope 99"},
		"run route served anywhere": {route{scope: ScopeNone, serve: serve, Route: openapi.Route{Method: "GET", Path: "/v1/runs/{id}/logs", ID: "logs"}},
			"is a run's route but routed none"},
		"sandbox scope without an id": {route{scope: ScopeSandbox, serve: serve, Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes", ID: "all"}},
			"has no {id}"},
		"body scope without a conversation": {route{scope: ScopeBody, serve: serve, Route: openapi.Route{Method: "POST", Path: "/v1/things", ID: "things", Body: Answer{}}},
			`"conversation" field`},
		"no handler": {route{scope: ScopeNone, Route: openapi.Route{Method: "GET", Path: "/v1/things", ID: "things"}},
			"has no handler"},
	} {
		tab := append(routeTable(), tc.rt)
		err := errors.Join(checkTable(tab)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.rt.public().Pattern()) {
			t.Errorf("%s: the check says %v; want it to name %q and say %q", name, err, tc.rt.public().Pattern(), tc.want)
		}
	}
}

// A rule kept apart from the table, so that a route wrongly marked there is
// caught: whatever acts on one sandbox (its sub-resources, and every method
// but GET on the sandbox itself) needs the replica that owns its
// conversation, where its pipe and processes live; only reading the
// sandbox's record may be served anywhere.
func TestSandboxRoutesAreRoutedToTheirOwner(t *testing.T) {
	const one = "/v1/sandboxes/{id}"
	n := 0
	for _, rt := range Routes() {
		bound := strings.HasPrefix(rt.Path, one+"/") || rt.Path == one && cmpOr(rt.Method, "GET") != "GET"
		if !bound {
			continue
		}
		n++
		if rt.Scope != ScopeSandbox {
			t.Errorf("%s %s is routed %s; a call on one sandbox must be routed by sandbox, to the replica that owns its conversation", rt.Method, rt.Path, rt.Scope)
		}
	}
	if n < 2 {
		t.Errorf("found %d routes acting on one sandbox; the table lost them (delete and stats at least)", n)
	}
}
