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
		want   string // "" means valid; otherwise the exact error message
		prefix bool   // want is a prefix only
	}{
		{"valid minimal", read, `{"path":"a.go"}`, "", false},
		{"valid full", read, `{"path":"a.go","offset":3,"limit":10}`, "", false},
		{"integer spelled 3.0", read, `{"path":"a","limit":3.0}`, "", false},
		{"string for integer", read, `{"path":"a","limit":"ten"}`, `argument "limit" must be an integer, got the string "ten"`, false},
		{"fraction for integer", read, `{"path":"a","limit":3.5}`, `argument "limit" must be an integer, got the number 3.5`, false},
		{"missing required", read, `{"offset":1}`, `missing required argument "path"`, false},
		{"unknown", read, `{"pth":"a"}`, `unknown argument "pth"; did you mean "path"? (known: path, offset, limit)`, false},
		{"unknown with required", read, `{"path":"a","pth":"a"}`, `unknown argument "pth" (known: path, offset, limit)`, false},
		{"two unknown", read, `{"path":"a","x":1,"y":2}`, `unknown arguments "x", "y" (known: path, offset, limit)`, false},
		{"array top", read, `[1,2]`, `arguments must be a JSON object, got an array`, false},
		{"string top", read, `"a"`, `arguments must be a JSON object, got the string "a"`, false},
		{"null top", read, `null`, `arguments must be a JSON object, got null`, false},
		{"below minimum", read, `{"path":"a","offset":0}`, `argument "offset" must be at least 1, got 0`, false},
		{"above maximum", read, `{"path":"a","limit":5001}`, `argument "limit" must be at most 5000, got 5001 (allowed: 1 to 5000)`, false},
		{"empty string", read, `{"path":""}`, `argument "path" must not be empty`, false},
		{"null field", read, `{"path":null}`, `argument "path" must be a string, got null`, false},
		{"malformed", read, `{"path": "a",}`, `arguments are not valid JSON: invalid character '}' looking for beginning of object key string at byte offset 14`, false},
		{"truncated", read, `{"path": "a`, `arguments are not valid JSON: the document ends early at byte offset 11`, true},
		{"trailing data", read, `{"path":"a"} {}`, `arguments are not valid JSON: unexpected data after the value`, true},
		{"empty body", read, ``, `arguments are empty; send a JSON object such as {}`, false},
		{"huge exponent integer", read, `{"path":"a","limit":1e999999999}`, `argument "limit" must be an integer, got the number 1e999999999`, false},
		{"alias of a missing required", read, `{"file":"x"}`, `unknown argument "file"; did you mean "path"? (known: path, offset, limit)`, false},
		{"alias spelt otherwise", read, `{"FilePath":"x"}`, `unknown argument "FilePath"; did you mean "path"? (known: path, offset, limit)`, false},
		{"case differs", read, `{"Path":"x"}`, `unknown argument "Path"; did you mean "path"? (known: path, offset, limit)`, false},
		{"no guess, required missing", read, `{"xyz":1}`, `unknown argument "xyz" (known: path, offset, limit); the required argument "path" is missing`, false},
		{"no guess for a given argument", read, `{"path":"a","file":"b"}`, `unknown argument "file" (known: path, offset, limit)`, false},
		{"two misspelt", read, `{"fiel":"a","lmit":3}`, `unknown arguments "fiel", "lmit"; did you mean "path" for "fiel" and "limit" for "lmit"? (known: path, offset, limit)`, false},
		{"many unknown", read, `{"path":"a","a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7}`, `unknown arguments "a", "b", "c", "d", "e", and 2 more (known: path, offset, limit)`, false},
		{"long unknown clipped", read, `{"path":"a","` + strings.Repeat("k", 100) + `":1}`, `unknown argument "` + strings.Repeat("k", 64) + `"... (known: path, offset, limit)`, false},
		{"below a range", read, `{"path":"a","limit":0}`, `argument "limit" must be at least 1, got 0 (allowed: 1 to 5000)`, false},
		{"offset past int64", read, `{"path":"a","offset":9223372036854775808}`, `argument "offset" must be at most 9223372036854775807, got 9223372036854775808`, false},
		{"offset 1e999", read, `{"path":"a","offset":1e999}`, `argument "offset" must be at most 9223372036854775807, got 1e999`, false},
		{"offset 1e+308", read, `{"path":"a","offset":1e+308}`, `argument "offset" must be at most 9223372036854775807, got 1e+308`, false},
		{"offset below int64", read, `{"path":"a","offset":-9223372036854775809}`, `argument "offset" must be at least 1, got -9223372036854775809`, false},
		{"limit 1e+308", read, `{"path":"a","limit":1e+308}`, `argument "limit" must be at most 5000, got 1e+308 (allowed: 1 to 5000)`, false},
		{"limit spelled 1e2", read, `{"path":"a","limit":1e2}`, "", false},
		{"number 1e999", rich, `{"ratio":1e999}`, `argument "ratio" must be at most 1, got 1e999 (allowed: 0 to 1)`, false},
		{"enum ok", rich, `{"mode":"fast"}`, "", false},
		{"enum bad", rich, `{"mode":"slow"}`, `argument "mode" must be one of "fast", "good", got the string "slow"`, false},
		{"number ok", rich, `{"ratio":0.5}`, "", false},
		{"number bad type", rich, `{"ratio":true}`, `argument "ratio" must be a number, got the boolean true`, false},
		{"number range", rich, `{"ratio":1.5}`, `argument "ratio" must be at most 1, got 1.5 (allowed: 0 to 1)`, false},
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

// A bound a person reads is written out, not in exponent form.
func TestBoundsReadPlainly(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":1000000}}}`)
	err := s.Validate(json.RawMessage(`{"n":2000000}`))
	if err == nil || err.Error() != `argument "n" must be at most 1000000, got 2000000 (allowed: 1 to 1000000)` {
		t.Fatalf("got %v", err)
	}
	free := mustCompile(t, `{"type":"object","properties":{"x":{"type":"number"}}}`)
	err = free.Validate(json.RawMessage(`{"x":1e400}`))
	if err == nil || err.Error() != `argument "x" must be at most 1.7976931348623157e+308, got 1e400` {
		t.Fatalf("got %v", err)
	}
}

func TestNormalize(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
	  "n": {"type":"integer"},
	  "lines": {"type":"array","items":{"type":"integer","minimum":1}},
	  "ratio": {"type":"number"},
	  "s": {"type":"string"}}}`)
	for _, c := range []struct{ in, want string }{
		{`{"n":3}`, `{"n":3}`},
		{`{"n":3.0,"s":"<a&b>"}`, `{"n":3,"s":"<a&b>"}`},
		{`{"n":1e2}`, `{"n":100}`},
		{`{"n":-0.0}`, `{"n":0}`},
		{`{"lines":[1.0,2,3E0]}`, `{"lines":[1,2,3]}`},
		{`{"ratio":1.0}`, `{"ratio":1.0}`},
	} {
		got, err := s.Normalize(json.RawMessage(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if string(got) != c.want {
			t.Errorf("Normalize(%s) = %s, want %s", c.in, got, c.want)
		}
		var v struct {
			N     int     `json:"n"`
			Lines []int   `json:"lines"`
			Ratio float64 `json:"ratio"`
			S     string  `json:"s"`
		}
		if err := json.Unmarshal(got, &v); err != nil {
			t.Errorf("Normalize(%s) = %s does not decode: %v", c.in, got, err)
		}
	}
	in := json.RawMessage(`{"n": 3}`)
	if got, _ := s.Normalize(in); &got[0] != &in[0] {
		t.Errorf("arguments needing no rewrite were copied")
	}
}

// Whatever the schema accepts decodes into the Go types tools use: the
// property of the schema layer that keeps decoder text out of results.
func FuzzNormalizeDecodes(f *testing.F) {
	for _, n := range []string{"0", "3", "3.0", "1e2", "-1", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "1e19", "1e999", "1e+308", "1e-400", "1.5", "-0", "2e-1", "1E18", "12345678901234567890e-10"} {
		f.Add(n)
	}
	s, err := Compile(json.RawMessage(`{"type":"object","properties":{
	  "i": {"type":"integer"}, "p": {"type":"integer","minimum":1,"maximum":65535},
	  "l": {"type":"array","items":{"type":"integer"}}, "f": {"type":"number"}}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, num string) {
		var probe json.Number
		if json.Unmarshal([]byte(num), &probe) != nil {
			return // not a JSON number
		}
		for _, field := range []string{"i", "p", "f"} {
			args := json.RawMessage(`{"` + field + `":` + num + `,"l":[` + num + `]}`)
			got, err := s.Normalize(args)
			if err != nil {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || strings.Contains(err.Error(), "json:") {
					t.Fatalf("%s: %v", args, err)
				}
				continue
			}
			var v struct {
				I int64   `json:"i"`
				P uint16  `json:"p"`
				L []int   `json:"l"`
				F float64 `json:"f"`
			}
			if err := json.Unmarshal(got, &v); err != nil {
				t.Fatalf("%s accepted as %s but does not decode: %v", args, got, err)
			}
		}
	})
}

func TestCompileRejectsInvertedRange(t *testing.T) {
	_, err := Compile(json.RawMessage(`{"type":"integer","minimum":5,"maximum":1}`))
	if err == nil || !strings.Contains(err.Error(), "minimum is greater than its maximum") {
		t.Fatalf("got %v", err)
	}
}
