// Package schema validates tool arguments against the small subset of JSON
// Schema that sandboxd's tools use: type (object, string, integer, number,
// boolean, array), properties, required, additionalProperties: false, enum,
// items, minimum/maximum, minLength/maxLength, minItems/maxItems, plus the
// annotations description, title, default and examples.
//
// A schema is compiled once at registration; Validate then returns one
// error message that names the offending field, because that message goes
// straight to the model that made the call. Everything Validate accepts can
// be decoded into the Go types tools use: an integer is bounded to int64 and
// a number to float64 even where the schema sets no bound, and Normalize
// rewrites an integer spelled 3.0 or 1e2 as 3 or 100.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Schema is a compiled schema node. It is immutable and safe for concurrent use.
type Schema struct {
	types       []string // allowed JSON types; empty means any
	properties  map[string]*Schema
	order       []string // property names in declaration order, for messages
	required    []string
	closed      bool // additionalProperties: false
	enum        []any
	items       *Schema
	minimum     *big.Float // as declared; nil when not
	maximum     *big.Float
	bounds      bounds // what a number must lie within: declared, else what Go can hold
	minLength   *int
	maxLength   *int
	minItems    *int
	maxItems    *int
	description string
}

// Description returns the node's description annotation.
func (s *Schema) Description() string { return s.description }

var knownTypes = []string{"object", "string", "integer", "number", "boolean", "array", "null"}

// annotations are accepted and ignored.
var annotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true,
	"$schema": true, "$comment": true,
}

// Compile parses raw as a schema of the supported subset. An unknown keyword
// is an error, so that a typo in a tool's schema fails at registration
// instead of silently validating nothing.
func Compile(raw json.RawMessage) (*Schema, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, errdefs.InvalidArgument("schema is not valid JSON: %v", err)
	}
	return compile(v, "schema")
}

func compile(v any, at string) (*Schema, error) {
	o, ok := v.(*object)
	if !ok {
		return nil, errdefs.InvalidArgument("%s must be a JSON object, got %s", at, describe(v))
	}
	s := &Schema{}
	for _, k := range o.keys {
		val := o.vals[k]
		var err error
		switch k {
		case "type":
			err = s.compileType(val, at)
		case "properties":
			err = s.compileProperties(val, at)
		case "required":
			s.required, err = stringList(val, at+".required")
		case "additionalProperties":
			b, ok := val.(bool)
			if !ok {
				return nil, errdefs.InvalidArgument("%s.additionalProperties must be a boolean (only true/false are supported)", at)
			}
			s.closed = !b
		case "enum":
			list, ok := val.([]any)
			if !ok || len(list) == 0 {
				return nil, errdefs.InvalidArgument("%s.enum must be a non-empty array", at)
			}
			for _, e := range list {
				switch e.(type) {
				case string, json.Number, bool, nil:
				default:
					return nil, errdefs.InvalidArgument("%s.enum may hold only strings, numbers, booleans and null", at)
				}
			}
			s.enum = list
		case "items":
			s.items, err = compile(val, at+".items")
		case "minimum":
			s.minimum, err = number(val, at+".minimum")
		case "maximum":
			s.maximum, err = number(val, at+".maximum")
		case "minLength":
			s.minLength, err = count(val, at+".minLength")
		case "maxLength":
			s.maxLength, err = count(val, at+".maxLength")
		case "minItems":
			s.minItems, err = count(val, at+".minItems")
		case "maxItems":
			s.maxItems, err = count(val, at+".maxItems")
		default:
			if !annotations[k] {
				return nil, errdefs.InvalidArgument("%s uses the unsupported keyword %q", at, k)
			}
			if k == "description" {
				if d, ok := val.(string); ok {
					s.description = d
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	for _, r := range s.required {
		if _, ok := s.properties[r]; !ok && s.closed {
			return nil, errdefs.InvalidArgument("%s requires %q but does not declare it in properties", at, r)
		}
	}
	if s.minimum != nil && s.maximum != nil && s.minimum.Cmp(s.maximum) > 0 {
		return nil, errdefs.InvalidArgument("%s.minimum is greater than its maximum", at)
	}
	s.bounds = newBounds(s)
	return s, nil
}

func (s *Schema) compileType(val any, at string) error {
	switch t := val.(type) {
	case string:
		s.types = []string{t}
	case []any:
		for _, e := range t {
			str, ok := e.(string)
			if !ok {
				return errdefs.InvalidArgument("%s.type must list type names", at)
			}
			s.types = append(s.types, str)
		}
	default:
		return errdefs.InvalidArgument("%s.type must be a string or an array of strings", at)
	}
	for _, t := range s.types {
		if !slices.Contains(knownTypes, t) {
			return errdefs.InvalidArgument("%s.type names the unknown type %q", at, t)
		}
	}
	return nil
}

func (s *Schema) compileProperties(val any, at string) error {
	props, ok := val.(*object)
	if !ok {
		return errdefs.InvalidArgument("%s.properties must be an object", at)
	}
	s.properties = make(map[string]*Schema, len(props.keys))
	for _, name := range props.keys {
		c, err := compile(props.vals[name], at+".properties."+name)
		if err != nil {
			return err
		}
		s.properties[name] = c
	}
	// Declaration order is kept so that "known: path, offset, limit" reads
	// the way the tool's author listed the arguments.
	s.order = props.keys
	return nil
}

func stringList(val any, at string) ([]string, error) {
	list, ok := val.([]any)
	if !ok {
		return nil, errdefs.InvalidArgument("%s must be an array of strings", at)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		str, ok := e.(string)
		if !ok {
			return nil, errdefs.InvalidArgument("%s must be an array of strings", at)
		}
		out = append(out, str)
	}
	return out, nil
}

func number(val any, at string) (*big.Float, error) {
	n, ok := val.(json.Number)
	if !ok {
		return nil, errdefs.InvalidArgument("%s must be a number", at)
	}
	f, _, err := big.ParseFloat(string(n), 10, 128, big.ToNearestEven)
	if err != nil {
		return nil, errdefs.InvalidArgument("%s must be a number", at)
	}
	return f, nil
}

func count(val any, at string) (*int, error) {
	n, ok := val.(json.Number)
	if !ok {
		return nil, errdefs.InvalidArgument("%s must be a non-negative integer", at)
	}
	i, err := n.Int64()
	if err != nil || i < 0 || i > 1<<31 {
		return nil, errdefs.InvalidArgument("%s must be a non-negative integer", at)
	}
	c := int(i)
	return &c, nil
}

// describe names a decoded JSON value for a message: `the string "ten"`,
// `the number 3.5`, `an array`, ...
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("the boolean %t", t)
	case json.Number:
		return "the number " + clip(string(t), 40)
	case string:
		return "the string " + quoteClip(t, 40)
	case []any:
		return "an array"
	case map[string]any, *object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func quoteClip(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return fmt.Sprintf("%q...", string(r[:n]))
	}
	return fmt.Sprintf("%q", s)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func joinNames(names []string) string { return strings.Join(names, ", ") }
