package openapi_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/openapi"
)

type inner struct {
	N uint `json:"n"`
}

type Embedded struct {
	Promoted string `json:"promoted"`
}

type level string

type sample struct {
	Embedded
	Name     string `json:"name"`
	Optional string `json:"optional,omitempty"`
	Zero     int    `json:"zero,omitzero"`
	Skipped  string `json:"-"`
	//lint:ignore U1000 unexported: the document must leave it out, so nothing writes it
	hidden   string
	When     time.Time         `json:"when"`
	Raw      json.RawMessage   `json:"raw"`
	Labels   map[string]string `json:"labels,omitempty"`
	Ptr      *inner            `json:"ptr"`
	Items    []inner           `json:"items"`
	Level    level             `json:"level"`
	Count    int64             `json:"count,string"`
	Untagged bool
}

func build(t *testing.T, spec openapi.Spec, opts ...openapi.Option) map[string]any {
	t.Helper()
	doc, err := openapi.Build(spec, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := doc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func at(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", strings.Join(path, "/"), v)
		}
		v = m[p]
	}
	return v
}

func TestReflectsAsEncodingJSONWrites(t *testing.T) {
	doc := build(t, openapi.Spec{Info: openapi.Info{Title: "t", Version: "1"}, Routes: []openapi.Route{
		{Method: "POST", Path: "/v1/things/{id}", ID: "put", Body: sample{}, Responses: []openapi.Response{{Status: 200, Body: []sample{}}}},
	}}, openapi.WithType(level(""), openapi.Enum("a", "b")), openapi.WithField(sample{}, "name", openapi.Describe("The name.")))
	s := at(t, doc, "components", "schemas", "sample")
	props := at(t, s, "properties").(map[string]any)
	var names []string
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"Untagged", "count", "items", "labels", "level", "name", "optional", "promoted", "ptr", "raw", "when", "zero"}
	if !slices.Equal(names, want) {
		t.Errorf("properties %v, want %v", names, want)
	}
	var req []string
	for _, r := range at(t, s, "required").([]any) {
		req = append(req, r.(string))
	}
	slices.Sort(req)
	if wantReq := []string{"Untagged", "count", "items", "level", "name", "promoted", "ptr", "raw", "when"}; !slices.Equal(req, wantReq) {
		t.Errorf("required %v, want %v", req, wantReq)
	}
	checks := map[string]any{
		"when":     map[string]any{"type": "string", "format": "date-time"},
		"raw":      map[string]any{},
		"labels":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
		"ptr":      map[string]any{"anyOf": []any{map[string]any{"$ref": "#/components/schemas/inner"}, map[string]any{"type": "null"}}},
		"items":    map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/inner"}},
		"level":    map[string]any{"type": "string", "enum": []any{"a", "b"}},
		"count":    map[string]any{"type": "string"},
		"name":     map[string]any{"type": "string", "description": "The name."},
		"Untagged": map[string]any{"type": "boolean"},
	}
	for name, want := range checks {
		if got := props[name]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if got := at(t, s, "additionalProperties"); got != false {
		t.Errorf("a struct's schema is closed; additionalProperties %v", got)
	}
	if got := at(t, doc, "components", "schemas", "inner", "properties", "n", "minimum"); got != 0.0 {
		t.Errorf("uint has minimum 0, got %v", got)
	}
	op := at(t, doc, "paths", "/v1/things/{id}", "post")
	if got := at(t, op, "responses", "200", "content", "application/json", "schema", "items", "$ref"); got != "#/components/schemas/sample" {
		t.Errorf("a slice answer refers to its element's component, got %v", got)
	}
	params := at(t, op, "parameters").([]any)
	if len(params) != 1 || at(t, params[0], "name") != "id" || at(t, params[0], "in") != "path" || at(t, params[0], "required") != true {
		t.Errorf("path parameter: %v", params)
	}
}

func TestErrorsAndStreams(t *testing.T) {
	type errBody struct {
		Message string `json:"message"`
	}
	type ev struct {
		Text string `json:"text"`
	}
	doc := build(t, openapi.Spec{Info: openapi.Info{Title: "t", Version: "1"}, ErrorBody: errBody{}, Routes: []openapi.Route{
		{Method: "GET", Path: "/open", ID: "open", Public: true, Responses: []openapi.Response{{Status: 204}}},
		{Method: "GET", Path: "/stream", ID: "stream", Errors: []int{404, 400},
			Responses: []openapi.Response{{Status: 200, Body: ev{}, Events: []openapi.Event{{Name: "line", Data: ev{}}}}}},
	}})
	if sec := at(t, doc, "paths", "/open", "get", "security"); !reflect.DeepEqual(sec, []any{}) {
		t.Errorf("a public route has security [], got %v", sec)
	}
	if sec := at(t, doc, "paths", "/stream", "get", "security"); sec != nil {
		t.Errorf("a bearer route keeps the document's security, got %v", sec)
	}
	resp := at(t, doc, "paths", "/stream", "get", "responses").(map[string]any)
	for _, code := range []string{"400", "404", "default"} {
		if got := at(t, resp[code], "content", "application/json", "schema", "$ref"); got != "#/components/schemas/errBody" {
			t.Errorf("status %s answers %v, want the error body", code, got)
		}
	}
	if got := at(t, resp["200"], "content", "text/event-stream", openapi.EventsKey, "line", "$ref"); got != "#/components/schemas/ev" {
		t.Errorf("the stream's event: %v", got)
	}
	if got := at(t, resp["200"], "content", "application/json", "schema", "$ref"); got != "#/components/schemas/ev" {
		t.Errorf("the plain answer beside the stream: %v", got)
	}
}

func TestBuildRefusesABadTable(t *testing.T) {
	ok := []openapi.Response{{Status: 200}}
	for name, routes := range map[string][]openapi.Route{
		"twice":      {{Method: "GET", Path: "/a", ID: "a", Responses: ok}, {Method: "GET", Path: "/a", ID: "b", Responses: ok}},
		"same ID":    {{Method: "GET", Path: "/a", ID: "a", Responses: ok}, {Method: "GET", Path: "/b", ID: "a", Responses: ok}},
		"no ID":      {{Method: "GET", Path: "/a", Responses: ok}},
		"bad status": {{Method: "GET", Path: "/a", ID: "a", Responses: []openapi.Response{{Status: 42}}}},
		"no answer":  {{Method: "GET", Path: "/a", ID: "a"}},
	} {
		if _, err := openapi.Build(openapi.Spec{Routes: routes}); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

func TestNameCollision(t *testing.T) {
	type Option struct {
		A string `json:"a"`
	}
	type wrap struct {
		Mine  Option         `json:"mine"`
		Other openapi.Schema `json:"other"`
	}
	doc := build(t, openapi.Spec{Info: openapi.Info{Title: "t", Version: "1"}, Routes: []openapi.Route{
		{Method: "GET", Path: "/a", ID: "a", Responses: []openapi.Response{{Status: 200, Body: wrap{}}}},
	}}, openapi.WithName(Option{}, "MyOption"))
	if at(t, doc, "components", "schemas", "MyOption") == nil {
		t.Errorf("WithName did not name the component: %v", at(t, doc, "components", "schemas"))
	}
}
