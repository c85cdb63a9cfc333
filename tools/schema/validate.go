package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Validate checks args (a JSON document) against the schema. The error, an
// errdefs.ErrInvalidArgument, is one sentence naming the offending field.
// Empty args are not special here: callers that treat an empty body as {}
// say so before calling.
func (s *Schema) Validate(args json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return errdefs.InvalidArgument("%s", syntaxSentence(err, args))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errdefs.InvalidArgument("arguments are not valid JSON: unexpected data after the value at byte offset %d; send exactly one JSON object", dec.InputOffset())
	}
	if s.allows("object") && len(s.types) == 1 {
		if _, ok := v.(map[string]any); !ok {
			return errdefs.InvalidArgument("arguments must be a JSON object, got %s", describe(v))
		}
	}
	if msg := s.check(v, ""); msg != "" {
		return errdefs.InvalidArgument("%s", msg)
	}
	return nil
}

func syntaxSentence(err error, doc []byte) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(doc)) == 0:
		return "arguments are empty; send a JSON object such as {}"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Sprintf("arguments are not valid JSON: the document ends early at byte offset %d (an unclosed string, object or array)", len(doc))
	case errors.As(err, &se):
		return fmt.Sprintf("arguments are not valid JSON: %s at byte offset %d", se.Error(), se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("arguments are not valid JSON: %s at byte offset %d", te.Error(), te.Offset)
	}
	return "arguments are not valid JSON: " + err.Error()
}

// check returns "" when v is valid, otherwise the sentence. at is the field
// path ("" for the top level).
func (s *Schema) check(v any, at string) string {
	if len(s.types) > 0 && !s.typeOK(v) {
		return fmt.Sprintf("%s must be %s, got %s", subject(at), typeNames(s.types), describe(v))
	}
	if len(s.enum) > 0 && !slices.ContainsFunc(s.enum, func(e any) bool { return equal(e, v) }) {
		return fmt.Sprintf("%s must be one of %s, got %s", subject(at), enumList(s.enum), describe(v))
	}
	switch t := v.(type) {
	case map[string]any:
		return s.checkObject(t, at)
	case []any:
		return s.checkArray(t, at)
	case string:
		n := utf8.RuneCountInString(t)
		if s.minLength != nil && n < *s.minLength {
			if *s.minLength == 1 {
				return fmt.Sprintf("%s must not be empty", subject(at))
			}
			return fmt.Sprintf("%s must be at least %d characters long, got %d", subject(at), *s.minLength, n)
		}
		if s.maxLength != nil && n > *s.maxLength {
			return fmt.Sprintf("%s must be at most %d characters long, got %d", subject(at), *s.maxLength, n)
		}
	case json.Number:
		f, _, err := big.ParseFloat(string(t), 10, 128, big.ToNearestEven)
		if err != nil {
			return fmt.Sprintf("%s is not a usable number: %s", subject(at), clip(string(t), 40))
		}
		if s.minimum != nil && f.Cmp(s.minimum) < 0 {
			return fmt.Sprintf("%s must be at least %s, got %s", subject(at), s.minimum.Text('g', -1), clip(string(t), 40))
		}
		if s.maximum != nil && f.Cmp(s.maximum) > 0 {
			return fmt.Sprintf("%s must be at most %s, got %s", subject(at), s.maximum.Text('g', -1), clip(string(t), 40))
		}
	}
	return ""
}

func (s *Schema) checkObject(m map[string]any, at string) string {
	for _, r := range s.required {
		if _, ok := m[r]; !ok {
			return fmt.Sprintf("missing required argument %q", join(at, r))
		}
	}
	if s.closed {
		var unknown []string
		for k := range m {
			if _, ok := s.properties[k]; !ok {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			known := "it takes none"
			if len(s.order) > 0 {
				known = "known: " + joinNames(s.order)
			}
			word := "argument"
			if len(unknown) > 1 {
				word = "arguments"
			}
			quoted := make([]string, len(unknown))
			for i, u := range unknown {
				quoted[i] = strconv.Quote(join(at, u))
			}
			return fmt.Sprintf("unknown %s %s (%s)", word, strings.Join(quoted, ", "), known)
		}
	}
	// Declared order first, so the first problem reported is the first one
	// the author listed.
	for _, name := range s.order {
		val, ok := m[name]
		if !ok {
			continue
		}
		if msg := s.properties[name].check(val, join(at, name)); msg != "" {
			return msg
		}
	}
	return ""
}

func (s *Schema) checkArray(list []any, at string) string {
	if s.minItems != nil && len(list) < *s.minItems {
		return fmt.Sprintf("%s must have at least %d items, got %d", subject(at), *s.minItems, len(list))
	}
	if s.maxItems != nil && len(list) > *s.maxItems {
		return fmt.Sprintf("%s must have at most %d items, got %d", subject(at), *s.maxItems, len(list))
	}
	if s.items != nil {
		for i, e := range list {
			if msg := s.items.check(e, fmt.Sprintf("%s[%d]", at, i)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

func (s *Schema) allows(t string) bool { return slices.Contains(s.types, t) }

func (s *Schema) typeOK(v any) bool {
	for _, t := range s.types {
		switch t {
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		case "number":
			if _, ok := v.(json.Number); ok {
				return true
			}
		case "integer":
			if n, ok := v.(json.Number); ok && isInteger(n) {
				return true
			}
		}
	}
	return false
}

// isInteger accepts 3 and 3.0 (JSON Schema counts values, not spellings) and
// refuses 3.5. big.Float keeps a huge exponent cheap.
func isInteger(n json.Number) bool {
	f, _, err := big.ParseFloat(string(n), 10, 128, big.ToNearestEven)
	return err == nil && f.IsInt()
}

func equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, _, e1 := big.ParseFloat(string(x), 10, 128, big.ToNearestEven)
		fy, _, e2 := big.ParseFloat(string(y), 10, 128, big.ToNearestEven)
		return e1 == nil && e2 == nil && fx.Cmp(fy) == 0
	case string, bool, nil:
		return a == b
	}
	return false
}

func enumList(list []any) string {
	parts := make([]string, len(list))
	for i, e := range list {
		switch t := e.(type) {
		case string:
			parts[i] = strconv.Quote(t)
		case nil:
			parts[i] = "null"
		default:
			parts[i] = fmt.Sprint(t)
		}
	}
	return strings.Join(parts, ", ")
}

func typeNames(types []string) string {
	names := make([]string, len(types))
	for i, t := range types {
		switch t {
		case "object", "array", "integer":
			names[i] = "an " + t
		case "null":
			names[i] = "null"
		default:
			names[i] = "a " + t
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func subject(at string) string {
	if at == "" {
		return "arguments"
	}
	return fmt.Sprintf("argument %q", at)
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}
