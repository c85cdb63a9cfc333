package schema

import (
	"encoding/json"
	"testing"
)

// The read tool's schema as it registers (limit capped at 2000 lines), and
// the arguments of a typical call.
const benchReadSchema = `{
  "type": "object",
  "properties": {
    "path":   {"type": "string", "minLength": 1, "description": "File to read."},
    "offset": {"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "1-based line number to start at."},
    "limit":  {"type": "integer", "minimum": 1, "maximum": 2000, "description": "How many lines to return."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

// BenchmarkValidateRead measures what the schema layer adds to every read
// call: validating {"path", "offset", "limit"} before the tool decodes it.
func BenchmarkValidateRead(b *testing.B) {
	s, err := Compile(json.RawMessage(benchReadSchema))
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"path":"internal/server/handler.go","offset":120,"limit":200}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateReadRefused is the error path: an out-of-range offset.
func BenchmarkValidateReadRefused(b *testing.B) {
	s, err := Compile(json.RawMessage(benchReadSchema))
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"path":"a.go","offset":9223372036854775808}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(args); err == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkValidateReadUnknown is the other error path: a misspelt argument
// next to a missing required one.
func BenchmarkValidateReadUnknown(b *testing.B) {
	s, err := Compile(json.RawMessage(benchReadSchema))
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"file":"a.go","offset":3}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(args); err == nil {
			b.Fatal("accepted")
		}
	}
}
