package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

const readSchema = `{
  "type": "object",
  "properties": {
    "path":   {"type": "string", "description": "file", "minLength": 1},
    "offset": {"type": "integer", "minimum": 1},
    "limit":  {"type": "integer", "minimum": 1, "maximum": 5000}
  },
  "required": ["path"],
  "additionalProperties": false
}`

const richSchema = `{
  "type": "object",
  "properties": {
    "mode":  {"type": "string", "enum": ["fast", "good"]},
    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
    "flag":  {"type": "boolean"},
    "name":  {"type": "string", "maxLength": 3},
    "tags":  {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
    "opts":  {"type": "array", "items": {
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "required": ["label"],
        "additionalProperties": false}},
    "free":  {}
  }
}`

func mustCompile(t *testing.T, raw string) *Schema {
	t.Helper()
	s, err := Compile(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func TestValidate(t *testing.T) {
	read := mustCompile(t, readSchema)
	rich := mustCompile(t, richSchema)
	cases := []struct {
		name   string
		s      *Schema
		args   string
		want   string // "" means valid; otherwise the exact sentence
		prefix bool   // want is a prefix only
	}{
		{"valid minimal", read, `{"path":"a.go"}`, "", false},
		{"valid full", read, `{"path":"a.go","offset":3,"limit":10}`, "", false},
		{"integer spelled 3.0", read, `{"path":"a","limit":3.0}`, "", false},
		{"string for integer", read, `{"path":"a","limit":"ten"}`, `argument "limit" must be an integer, got the string "ten"`, false},
		{"fraction for integer", read, `{"path":"a","limit":3.5}`, `argument "limit" must be an integer, got the number 3.5`, false},
		{"missing required", read, `{"offset":1}`, `missing required argument "path"`, false},
		{"unknown", read, `{"pth":"a"}`, `missing required argument "path"`, false},
		{"unknown with required", read, `{"path":"a","pth":"a"}`, `unknown argument "pth" (known: path, offset, limit)`, false},
		{"two unknown", read, `{"path":"a","x":1,"y":2}`, `unknown arguments "x", "y" (known: path, offset, limit)`, false},
		{"array top", read, `[1,2]`, `arguments must be a JSON object, got an array`, false},
		{"string top", read, `"a"`, `arguments must be a JSON object, got the string "a"`, false},
		{"null top", read, `null`, `arguments must be a JSON object, got null`, false},
		{"below minimum", read, `{"path":"a","offset":0}`, `argument "offset" must be at least 1, got 0`, false},
		{"above maximum", read, `{"path":"a","limit":5001}`, `argument "limit" must be at most 5000, got 5001`, false},
		{"empty string", read, `{"path":""}`, `argument "path" must not be empty`, false},
		{"null field", read, `{"path":null}`, `argument "path" must be a string, got null`, false},
		{"malformed", read, `{"path": "a",}`, `arguments are not valid JSON: invalid character '}' looking for beginning of object key string at byte offset 14`, false},
		{"truncated", read, `{"path": "a`, `arguments are not valid JSON: the document ends early at byte offset 11`, true},
		{"trailing data", read, `{"path":"a"} {}`, `arguments are not valid JSON: unexpected data after the value`, true},
		{"empty body", read, ``, `arguments are empty; send a JSON object such as {}`, false},
		{"huge exponent integer", read, `{"path":"a","limit":1e999999999}`, `argument "limit" must be an integer, got the number 1e999999999`, false},
		{"enum ok", rich, `{"mode":"fast"}`, "", false},
		{"enum bad", rich, `{"mode":"slow"}`, `argument "mode" must be one of "fast", "good", got the string "slow"`, false},
		{"number ok", rich, `{"ratio":0.5}`, "", false},
		{"number bad type", rich, `{"ratio":true}`, `argument "ratio" must be a number, got the boolean true`, false},
		{"number range", rich, `{"ratio":1.5}`, `argument "ratio" must be at most 1, got 1.5`, false},
		{"boolean bad", rich, `{"flag":"yes"}`, `argument "flag" must be a boolean, got the string "yes"`, false},
		{"maxLength counts characters", rich, `{"name":"žžž"}`, "", false},
		{"maxLength", rich, `{"name":"abcd"}`, `argument "name" must be at most 3 characters long, got 4`, false},
		{"minItems", rich, `{"tags":[]}`, `argument "tags" must have at least 1 items, got 0`, false},
		{"maxItems", rich, `{"tags":["a","b","c"]}`, `argument "tags" must have at most 2 items, got 3`, false},
		{"item type", rich, `{"tags":["a",2]}`, `argument "tags[1]" must be a string, got the number 2`, false},
		{"nested missing", rich, `{"opts":[{"label":"x"},{}]}`, `missing required argument "opts[1].label"`, false},
		{"nested unknown", rich, `{"opts":[{"label":"x","lable":"y"}]}`, `unknown argument "opts[0].lable" (known: label)`, false},
		{"untyped accepts anything", rich, `{"free":[{"x":null}]}`, "", false},
		{"open object allows extra", rich, `{"other":1}`, "", false},
		{"long string clipped", read, `{"path":"a","limit":"` + strings.Repeat("x", 100) + `"}`, `argument "limit" must be an integer, got the string "` + strings.Repeat("x", 40) + `"...`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.s.Validate(json.RawMessage(c.args))
			if c.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q, got valid", c.want)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error is not InvalidArgument: %v", err)
			}
			got := err.Error()
			if c.prefix && !strings.HasPrefix(got, c.want) || !c.prefix && got != c.want {
				t.Errorf("\n got: %s\nwant: %s", got, c.want)
			}
			if strings.Contains(got, "\n") {
				t.Errorf("message is not one line: %q", got)
			}
		})
	}
}

func TestCompileRejects(t *testing.T) {
	cases := map[string]string{
		`[]`:               "schema must be a JSON object",
		`{"type":"thing"}`: `unknown type "thing"`,
		`{"type":"object","properties":{"a":{"tpye":"string"}}}`: `schema.properties.a uses the unsupported keyword "tpye"`,
		`{"type":"object","additionalProperties":{}}`:            "additionalProperties must be a boolean",
		`{"enum":[]}`:        "enum must be a non-empty array",
		`{"enum":[{"a":1}]}`: "enum may hold only",
		`{"minLength":-1}`:   "minLength must be a non-negative integer",
		`{"minimum":"1"}`:    "minimum must be a number",
		`{"type":"object","required":["x"],"properties":{},"additionalProperties":false}`: `requires "x" but does not declare it`,
		`{"type":"object",`:               "schema is not valid JSON",
		`{"properties":{"a":{}, "a":{}}}`: "duplicate key",
	}
	for raw, want := range cases {
		_, err := Compile(json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%s) = %v, want it to mention %q", raw, err, want)
		}
	}
}

func TestDescription(t *testing.T) {
	s := mustCompile(t, `{"type":"object","description":"reads a file"}`)
	if s.Description() != "reads a file" {
		t.Fatalf("Description() = %q", s.Description())
	}
}
