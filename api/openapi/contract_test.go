package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/apitest"
	"github.com/sandboxd/sandboxd/api/openapi/openapitest"
	"github.com/sandboxd/sandboxd/tools"
)

// registeredPatterns walks files for every literal pattern handed to a
// mux (mux.Handle / mux.HandleFunc). The API registers its routes from its
// route table; a literal registration is a route that bypassed it.
func registeredPatterns(t *testing.T, files []string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				p, err := strconv.Unquote(lit.Value)
				if err == nil {
					out = append(out, p)
				}
			}
			return true
		})
	}
	return out
}

func TestEveryV1RouteIsInTheTable(t *testing.T) {
	// The walk must see registrations, or finding none proves nothing.
	probe := filepath.Join(t.TempDir(), "probe.go")
	src := "package p\n\nimport \"net/http\"\n\nfunc f(mux *http.ServeMux, h http.Handler) {\n\tmux.Handle(\"GET /v1/probe\", h)\n\tmux.HandleFunc(\"/v1/other\", h.ServeHTTP)\n}\n"
	if err := os.WriteFile(probe, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := registeredPatterns(t, []string{probe}); len(got) != 2 || got[0] != "GET /v1/probe" || got[1] != "/v1/other" {
		t.Fatalf("the walk found %q in a file registering two routes; it is broken", got)
	}

	inTable := map[string]bool{}
	for _, rt := range api.Contract().Routes {
		inTable[rt.Method+" "+rt.Path] = true
	}
	if len(inTable) < 10 {
		t.Fatalf("api.Contract() has only %d routes; the table is broken", len(inTable))
	}
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	for _, p := range registeredPatterns(t, files) {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			path = method
		}
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		if !ok {
			t.Errorf("route %q has no method; give it one and an entry in the route table (api/routes.go)", p)
			continue
		}
		if !inTable[p] {
			t.Errorf("route %q is served but not in api.Contract(); add its entry (request and answer types, scope) to the route table in api/routes.go instead of registering it by hand", p)
		}
	}
}

// server is the API over fakes, as a daemon builds it (with /metrics).
func server(t *testing.T) *httptest.Server {
	t.Helper()
	reg := tools.NewRegistry()
	reg.Register(echoTool{})
	tok, _ := api.ParseTenantToken("a", api.HashToken("ta"))
	srv := httptest.NewServer(api.New(apitest.New(), reg, api.NewTokenAuth(tok), api.WithGatherer(prometheus.NewRegistry())))
	t.Cleanup(srv.Close)
	return srv
}

type echoTool struct{}

func (echoTool) Spec() tools.Spec {
	return tools.Spec{Name: "echo", Description: "echo", Level: tools.LevelRead,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
}
func (echoTool) Available(*tools.Env) bool { return true }
func (echoTool) Call(ctx context.Context, env *tools.Env, args json.RawMessage) (tools.Result, error) {
	var a struct{ Text string }
	json.Unmarshal(args, &a)
	tools.EmitOutput(ctx, "stdout", "printed "+a.Text+"\n")
	return tools.Text("echo: " + a.Text), nil
}

func fetchDoc(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url + "/v1/openapi.json") // no token: the contract is public
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return b
}

func TestServedDocumentHasEveryServedRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(fetchDoc(t, server(t).URL), &doc); err != nil {
		t.Fatal(err)
	}
	for _, rt := range api.Contract().Routes {
		// The document writes a {rest...} wildcard as the parameter {rest}.
		_, listed := doc.Paths[strings.ReplaceAll(rt.Path, "...}", "}")][strings.ToLower(rt.Method)]
		if !listed && !rt.Planned {
			t.Errorf("%s %s is in the table but not in the served document: the mux does not route it to that pattern", rt.Method, rt.Path)
		}
	}
}

// compileMeta compiles the OpenAPI 3.1 schema vendored in testdata.
func compileMeta(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/oas-3.1-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("https://spec.openapis.org/oas/3.1/schema/2022-10-07", meta); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("https://spec.openapis.org/oas/3.1/schema/2022-10-07")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDocumentIsOpenAPI31(t *testing.T) {
	meta := compileMeta(t)
	b, err := api.OpenAPI(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.Validate(v); err != nil {
		t.Fatalf("the document is not OpenAPI 3.1: %v", err)
	}
	// The Schema Objects are JSON Schema 2020-12: compiling each checks it
	// against that meta-schema.
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem:///openapi.json", v); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	json.Unmarshal(b, &doc)
	for name := range doc.Components.Schemas {
		if _, err := c.Compile("mem:///openapi.json#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}
}

// TestMetaSchemaCatchesBadDocuments makes sure the vendored schema is no
// rubber stamp.
func TestMetaSchemaCatchesBadDocuments(t *testing.T) {
	meta := compileMeta(t)
	good := `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"description":"ok"}}}}}}`
	for name, doc := range map[string]string{
		"good":              good,
		"3.0":               strings.Replace(good, "3.1.0", "3.0.3", 1),
		"no info version":   strings.Replace(good, `,"version":"1"`, "", 1),
		"no description":    strings.Replace(good, `{"description":"ok"}`, `{}`, 1),
		"bad status":        strings.Replace(good, `"200"`, `"20"`, 1),
		"unknown field":     strings.Replace(good, `"responses"`, `"answers"`, 1),
		"body parameter":    strings.Replace(good, `"responses"`, `"parameters":[{"name":"b","in":"body","schema":{}}],"responses"`, 1),
		"optional path arg": strings.Replace(good, `"responses"`, `"parameters":[{"name":"b","in":"path","schema":{}}],"responses"`, 1),
		"path not from /":   strings.Replace(good, `"/a"`, `"a"`, 1),
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatal(name, err)
		}
		err = meta.Validate(v)
		if (err == nil) != (name == "good") {
			t.Errorf("%s: validation error %v", name, err)
		}
	}
}

// TestLiveAnswersFitTheDocument drives the API over fakes through the
// checking transport: what the handlers respond is what the document says.
func TestLiveAnswersFitTheDocument(t *testing.T) {
	srv := server(t)
	chk, err := openapitest.New(fetchDoc(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var problems []error
	hc := &http.Client{Transport: chk.Transport(nil, "/v1/", func(err error) { problems = append(problems, err) })}
	do := func(method, path, accept, body string, want int) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer ta")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
		}
		return b
	}
	do("POST", "/v1/sandboxes", "", `{"conversation":"c1"}`, 201)
	do("POST", "/v1/sandboxes", "", `{"conversation":"c1"}`, 409)
	do("POST", "/v1/sandboxes", "", `{"conversation":"c2","bogus":1}`, 400)
	do("GET", "/v1/sandboxes", "", "", 200)
	do("GET", "/v1/sandboxes/nope", "", "", 404)
	var run api.Run
	json.Unmarshal(do("POST", "/v1/runs", "", `{"conversation":"c1"}`, 201), &run)
	do("GET", "/v1/runs", "", "", 200)
	do("GET", "/v1/runs/"+run.ID, "", "", 200)
	do("GET", "/v1/runs/"+run.ID+"/tools", "", "", 200)
	do("POST", "/v1/runs/"+run.ID+"/tools/echo", "", `{"text":"hi"}`, 200)
	stream := do("POST", "/v1/runs/"+run.ID+"/tools/echo", "text/event-stream", `{"text":"hi"}`, 200)
	if !bytes.Contains(stream, []byte("event: result")) || !bytes.Contains(stream, []byte("event: output")) {
		t.Fatalf("the stream has no output and result events: %s", stream)
	}
	do("POST", "/v1/runs/"+run.ID+"/tools/nope", "", `{}`, 404)
	do("POST", "/v1/runs/"+run.ID+"/tools/echo", "", `[1]`, 400)
	do("GET", "/v1/spaces/s1/questions", "", "", 503) // no question port wired
	do("GET", "/v1/nothing", "", "", 404)
	do("DELETE", "/v1/runs/"+run.ID, "", "", 204)
	do("GET", "/healthz", "", "", 200)
	for _, p := range problems {
		t.Error(p)
	}
}
