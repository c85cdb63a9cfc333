// Package openapitest checks live HTTP responses against an OpenAPI 3.1
// document: for tests that want every response they see held to the
// contract (the e2e harness wraps its client's transport with it).
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandboxd/sandboxd/api/openapi"
)

// docURL is where the document is loaded in the schema compiler.
const docURL = "mem:///openapi.json"

// Checker holds a document's operations and their compiled schemas.
type Checker struct {
	ops []operation

	mu       sync.Mutex // guards compiler and compiled
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema // by JSON pointer into the document
}

// operation is one method on one documented path.
type operation struct {
	method string
	path   string // as documented, "/v1/runs/{id}"
	re     *regexp.Regexp
	params int // wildcards: fewer is more specific
	resps  map[string]response
}

// response is one documented status: its content by media type.
type response struct {
	pointer string                // of the response object
	content map[string]mediaEntry // by media type
}

type mediaEntry struct {
	hasSchema bool
	events    []string // names of a stream's events
}

// doc is the part of an OpenAPI document the checker reads.
type doc struct {
	OpenAPI string `json:"openapi"`
	Paths   map[string]map[string]struct {
		Responses map[string]struct {
			Content map[string]struct {
				Schema json.RawMessage            `json:"schema"`
				Events map[string]json.RawMessage `json:"x-sse-events"`
			} `json:"content"`
		} `json:"responses"`
	} `json:"paths"`
}

// New reads an OpenAPI 3.1 document.
func New(document []byte) (*Checker, error) {
	var d doc
	if err := json.Unmarshal(document, &d); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not JSON: %w", err)
	}
	if !strings.HasPrefix(d.OpenAPI, "3.1.") {
		return nil, fmt.Errorf("the document is OpenAPI %q; this checker reads 3.1", d.OpenAPI)
	}
	root, err := jsonschema.UnmarshalJSON(bytes.NewReader(document))
	if err != nil {
		return nil, err
	}
	c := &Checker{compiler: jsonschema.NewCompiler(), compiled: map[string]*jsonschema.Schema{}}
	c.compiler.DefaultDraft(jsonschema.Draft2020)
	c.compiler.AssertFormat()
	if err := c.compiler.AddResource(docURL, root); err != nil {
		return nil, err
	}
	for path, methods := range d.Paths {
		re, n := pathPattern(path)
		for method, op := range methods {
			o := operation{method: strings.ToUpper(method), path: path, re: re, params: n, resps: map[string]response{}}
			for status, r := range op.Responses {
				ptr := "/paths/" + escape(path) + "/" + method + "/responses/" + status
				resp := response{pointer: ptr, content: map[string]mediaEntry{}}
				for mt, m := range r.Content {
					e := mediaEntry{hasSchema: len(m.Schema) > 0}
					for name := range m.Events {
						e.events = append(e.events, name)
					}
					resp.content[mt] = e
				}
				o.resps[status] = resp
			}
			c.ops = append(c.ops, o)
		}
	}
	sort.Slice(c.ops, func(i, j int) bool { return c.ops[i].params < c.ops[j].params })
	return c, nil
}

// pathPattern matches a documented path; each {param} is one segment.
func pathPattern(path string) (*regexp.Regexp, int) {
	var b strings.Builder
	n := 0
	b.WriteString("^")
	for i, seg := range strings.Split(path, "/") {
		if i > 0 {
			b.WriteString("/")
		}
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			b.WriteString("[^/]+")
			n++
			continue
		}
		b.WriteString(regexp.QuoteMeta(seg))
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()), n
}

// escape makes s one JSON pointer token, in a URL fragment.
func escape(s string) string {
	s = strings.ReplaceAll(s, "~", "~0")
	s = strings.ReplaceAll(s, "/", "~1")
	s = strings.ReplaceAll(s, "{", "%7B")
	return strings.ReplaceAll(s, "}", "%7D")
}

// find is the documented operation of a request, and the response of the
// status (or "default").
func (c *Checker) find(method, path string, status int) (operation, response, error) {
	for _, op := range c.ops {
		if op.method != method || !op.re.MatchString(path) {
			continue
		}
		if r, ok := op.resps[strconv.Itoa(status)]; ok {
			return op, r, nil
		}
		if r, ok := op.resps["default"]; ok {
			return op, r, nil
		}
		return op, response{}, fmt.Errorf("%s %s answered %d, which the document does not list for %s %s", method, path, status, op.method, op.path)
	}
	return operation{}, response{}, fmt.Errorf("%s %s answered %d, and the document has no such operation", method, path, status)
}

// Documented reports whether the document has an operation for the request.
func (c *Checker) Documented(method, path string) bool {
	for _, op := range c.ops {
		if op.method == method && op.re.MatchString(path) {
			return true
		}
	}
	return false
}

// Check checks one response: that the document lists its status and content
// type, and that a JSON body fits the schema. A stream's events are
// checked by CheckEvent.
func (c *Checker) Check(method, path string, status int, contentType string, body []byte) error {
	op, resp, err := c.find(method, path, status)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("%s %s (%s %s) answered %d", method, path, op.method, op.path, status)
	if len(resp.content) == 0 {
		if len(bytes.TrimSpace(body)) > 0 {
			return fmt.Errorf("%s with a body, which the document says has none: %.200s", where, body)
		}
		return nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("%s with Content-Type %q, which is not a media type", where, contentType)
	}
	entry, ok := resp.content[mt]
	if !ok {
		return fmt.Errorf("%s with Content-Type %s, which the document does not list (it lists %s)", where, mt, keys(resp.content))
	}
	if mt == openapi.MediaStream || !entry.hasSchema || mt != openapi.MediaJSON {
		return nil
	}
	return c.validate(where, resp.pointer+"/content/"+escape(mt)+"/schema", body)
}

// CheckEvent checks one event of a text/event-stream response: that the
// document names it and that its data fits the event's schema.
func (c *Checker) CheckEvent(method, path string, status int, event string, data []byte) error {
	op, resp, err := c.find(method, path, status)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("%s %s (%s %s) streamed event %q", method, path, op.method, op.path, event)
	entry, ok := resp.content[openapi.MediaStream]
	if !ok {
		return fmt.Errorf("%s, but the document has no stream for status %d", where, status)
	}
	known := false
	for _, e := range entry.events {
		known = known || e == event
	}
	if !known {
		return fmt.Errorf("%s, which the document does not name (it names %v)", where, entry.events)
	}
	return c.validate(where, resp.pointer+"/content/"+escape(openapi.MediaStream)+"/"+openapi.EventsKey+"/"+escape(event), data)
}

func (c *Checker) validate(where, pointer string, body []byte) error {
	s, err := c.schema(pointer)
	if err != nil {
		return fmt.Errorf("%s: the document's schema at %s does not compile: %w", where, pointer, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s with a body that is not JSON (%v): %.200s", where, err, body)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s with a body that does not fit the document: %v\nbody: %.2000s", where, err, body)
	}
	return nil
}

func (c *Checker) schema(pointer string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.compiled[pointer]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(docURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	c.compiled[pointer] = s
	return s, nil
}

func keys(m map[string]mediaEntry) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
