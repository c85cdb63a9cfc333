// Package openapi builds an OpenAPI 3.1 document from a table of routes
// and the Go types their handlers read and write, by reflection, the way
// encoding/json sees them: json tags name properties, omitempty and
// omitzero fields are optional, time.Time is a date-time string and
// json.RawMessage any value. Named structs become components/schemas.
//
// The document is the contract as the code has it; nothing in it is
// written beside the types by hand except what the types cannot say
// (enums, descriptions), given as options.
package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Version is the OpenAPI version of the documents Build makes.
const Version = "3.1.0"

// SecurityScheme is the name of the bearer token scheme in the document.
const SecurityScheme = "bearer"

// Document is an OpenAPI 3.1 document.
type Document struct {
	OpenAPI    string                           `json:"openapi"`
	Info       Info                             `json:"info"`
	Security   []map[string][]string            `json:"security,omitempty"`
	Paths      map[string]map[string]*Operation `json:"paths"`
	Components Components                       `json:"components"`
}

// Info describes the API.
type Info struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// Components holds the named schemas and the security scheme.
type Components struct {
	Schemas         map[string]*Schema        `json:"schemas,omitempty"`
	SecuritySchemes map[string]map[string]any `json:"securitySchemes,omitempty"`
}

// Operation is one method on one path.
type Operation struct {
	OperationID string                   `json:"operationId"`
	Summary     string                   `json:"summary,omitempty"`
	Description string                   `json:"description,omitempty"`
	Tags        []string                 `json:"tags,omitempty"`
	Parameters  []Parameter              `json:"parameters,omitempty"`
	RequestBody *RequestBody             `json:"requestBody,omitempty"`
	Responses   map[string]*ResponseSpec `json:"responses"`
	// Security is empty (not absent) on public operations.
	Security *[]map[string][]string `json:"security,omitempty"`
}

// Parameter is a path, query or header parameter.
type Parameter struct {
	Name        string  `json:"name"`
	In          string  `json:"in"`
	Description string  `json:"description,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Schema      *Schema `json:"schema"`
}

// RequestBody is an operation's body.
type RequestBody struct {
	Description string               `json:"description,omitempty"`
	Required    bool                 `json:"required,omitempty"`
	Content     map[string]MediaType `json:"content"`
}

// ResponseSpec is the response of one status.
type ResponseSpec struct {
	Description string               `json:"description"`
	Content     map[string]MediaType `json:"content,omitempty"`
}

// MediaType is the schema of one content type; Events only on streams.
type MediaType struct {
	Schema *Schema            `json:"schema,omitempty"`
	Events map[string]*Schema `json:"x-sse-events,omitempty"`
}

// Option tunes how Go types are described.
type Option func(*reflector)

// WithName names the component of v's struct type (default: its Go name).
func WithName(v any, name string) Option {
	return func(r *reflector) {
		t := reflect.TypeOf(v)
		r.names[t.PkgPath()+"."+t.Name()] = name
	}
}

// WithType edits the schema of every value of v's type (for a struct, its
// component).
func WithType(v any, edit ...func(*Schema)) Option {
	return func(r *reflector) { r.types[reflect.TypeOf(v)] = chain(edit) }
}

// WithField edits the schema of the property named field (its JSON name)
// of v's struct type.
func WithField(v any, field string, edit ...func(*Schema)) Option {
	return func(r *reflector) { r.fields[fieldKey{reflect.TypeOf(v), field}] = chain(edit) }
}

func chain(edits []func(*Schema)) func(*Schema) {
	return func(s *Schema) {
		for _, e := range edits {
			e(s)
		}
	}
}

// Enum restricts a schema to values.
func Enum(values ...any) func(*Schema) { return func(s *Schema) { s.Enum = values } }

// Describe sets a schema's description.
func Describe(text string) func(*Schema) { return func(s *Schema) { s.Description = text } }

// Spec is what Build makes a document of.
type Spec struct {
	Info   Info
	Routes []Route
	// ErrorBody is a value of the Go type of every error response.
	ErrorBody any
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}`)

// Build makes the document of spec. It fails on a table that cannot be
// one document: a route twice, an operationId twice, a bad path.
func Build(spec Spec, opts ...Option) (*Document, error) {
	r := newReflector()
	for _, o := range opts {
		o(r)
	}
	doc := &Document{
		OpenAPI:  Version,
		Info:     spec.Info,
		Security: []map[string][]string{{SecurityScheme: {}}},
		Paths:    map[string]map[string]*Operation{},
		Components: Components{
			SecuritySchemes: map[string]map[string]any{
				SecurityScheme: {"type": "http", "scheme": "bearer",
					"description": "A tenant's token: Authorization: Bearer <token>."},
			},
		},
	}
	var errBody *Schema
	if spec.ErrorBody != nil {
		errBody = r.schemaOf(reflect.TypeOf(spec.ErrorBody))
	}
	ids := map[string]bool{}
	for _, rt := range spec.Routes {
		if !strings.HasPrefix(rt.Path, "/") || rt.Method == "" || rt.ID == "" {
			return nil, fmt.Errorf("openapi: route %s %q needs a method, a path from / and an ID", rt.Method, rt.Path)
		}
		path := wildcard.ReplaceAllString(rt.Path, "{$1}")
		method := strings.ToLower(rt.Method)
		if doc.Paths[path][method] != nil {
			return nil, fmt.Errorf("openapi: route %s %s is in the table twice", rt.Method, rt.Path)
		}
		if ids[rt.ID] {
			return nil, fmt.Errorf("openapi: operation ID %q is used twice", rt.ID)
		}
		ids[rt.ID] = true
		op, err := r.operation(rt, errBody)
		if err != nil {
			return nil, err
		}
		if doc.Paths[path] == nil {
			doc.Paths[path] = map[string]*Operation{}
		}
		doc.Paths[path][method] = op
	}
	doc.Components.Schemas = r.components
	return doc, nil
}

func (r *reflector) operation(rt Route, errBody *Schema) (*Operation, error) {
	op := &Operation{
		OperationID: rt.ID,
		Summary:     rt.Summary,
		Description: rt.Description,
		Tags:        rt.Tags,
		Responses:   map[string]*ResponseSpec{},
	}
	if rt.Public {
		op.Security = &[]map[string][]string{}
	}
	for _, m := range wildcard.FindAllStringSubmatch(rt.Path, -1) {
		op.Parameters = append(op.Parameters, Parameter{Name: m[1], In: "path", Required: true, Schema: &Schema{Type: "string"}})
	}
	for _, in := range []struct {
		where  string
		params []Param
	}{{"query", rt.Query}, {"header", rt.Headers}} {
		for _, p := range in.params {
			s := p.Schema
			if s == nil {
				s = &Schema{Type: "string"}
			}
			op.Parameters = append(op.Parameters, Parameter{Name: p.Name, In: in.where, Description: p.Description, Required: p.Required, Schema: s})
		}
	}
	switch {
	case rt.Body != nil:
		op.RequestBody = &RequestBody{Description: rt.BodyDesc, Required: !rt.BodyOptional,
			Content: map[string]MediaType{MediaJSON: {Schema: r.schemaOf(reflect.TypeOf(rt.Body))}}}
	case rt.BodySchema != nil:
		op.RequestBody = &RequestBody{Description: rt.BodyDesc, Required: !rt.BodyOptional,
			Content: map[string]MediaType{MediaJSON: {Schema: rt.BodySchema}}}
	}
	for _, resp := range rt.Responses {
		key := strconv.Itoa(resp.Status)
		if resp.Status < 100 || resp.Status > 599 {
			return nil, fmt.Errorf("openapi: route %s %s answers status %d, which is not an HTTP status", rt.Method, rt.Path, resp.Status)
		}
		spec := &ResponseSpec{Description: resp.Description}
		if spec.Description == "" {
			spec.Description = http.StatusText(resp.Status)
		}
		ct := resp.ContentType
		if ct == "" {
			ct = MediaJSON
		}
		switch {
		case resp.Body != nil:
			spec.Content = map[string]MediaType{ct: {Schema: r.schemaOf(reflect.TypeOf(resp.Body))}}
		case resp.Schema != nil:
			spec.Content = map[string]MediaType{ct: {Schema: resp.Schema}}
		}
		if len(resp.Events) > 0 {
			if spec.Content == nil {
				spec.Content = map[string]MediaType{}
			}
			mt := MediaType{Schema: &Schema{Type: "string", Description: resp.StreamDesc}, Events: map[string]*Schema{}}
			for _, ev := range resp.Events {
				s := r.schemaOf(reflect.TypeOf(ev.Data))
				if ev.Description != "" {
					s.Description = ev.Description
				}
				mt.Events[ev.Name] = s
			}
			spec.Content[MediaStream] = mt
		}
		op.Responses[key] = spec
	}
	if errBody != nil {
		codes := append([]int(nil), rt.Errors...)
		sort.Ints(codes)
		for _, code := range codes {
			key := strconv.Itoa(code)
			if op.Responses[key] != nil {
				return nil, fmt.Errorf("openapi: route %s %s lists status %d as an answer and as an error", rt.Method, rt.Path, code)
			}
			op.Responses[key] = &ResponseSpec{Description: errorText(code), Content: map[string]MediaType{MediaJSON: {Schema: errBody}}}
		}
		op.Responses["default"] = &ResponseSpec{Description: "Any other error, with the error body.", Content: map[string]MediaType{MediaJSON: {Schema: errBody}}}
	}
	if len(op.Responses) == 0 {
		return nil, fmt.Errorf("openapi: route %s %s answers nothing", rt.Method, rt.Path)
	}
	return op, nil
}

// errorText names the wire code a status carries (DESIGN.md §3, Errors).
func errorText(code int) string {
	word := map[int]string{
		400: "invalid_argument", 401: "unauthenticated", 404: "not_found",
		409: "conflict", 412: "failed_precondition", 429: "resource_exhausted",
		500: "internal", 503: "unavailable", 504: "deadline_exceeded",
	}[code]
	if word == "" {
		return http.StatusText(code)
	}
	return http.StatusText(code) + ": code " + word + "."
}

// JSON is the document as served: indented, stable across builds of the
// same table.
func (d *Document) JSON() ([]byte, error) {
	return json.MarshalIndent(d, "", "  ")
}
