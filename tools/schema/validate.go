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
// errdefs.ErrInvalidArgument, is one error message naming the offending field.
// Empty args are not special here: callers that treat an empty body as {}
// say so before calling.
func (s *Schema) Validate(args json.RawMessage) error {
	_, err := s.Normalize(args)
	return err
}

// Normalize validates args like Validate and returns them ready for
// json.Unmarshal into the tool's Go types: args itself, or, when an integer
// argument was spelled with a fraction or an exponent (3.0, 1e2, which
// encoding/json refuses to put in an int), a re-encoding with plain integers.
func (s *Schema) Normalize(args json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errdefs.InvalidArgument("%s", syntaxSentence(err, args))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errdefs.InvalidArgument("arguments are not valid JSON: unexpected data after the value at byte offset %d; send exactly one JSON object", dec.InputOffset())
	}
	if s.allows("object") && len(s.types) == 1 {
		if _, ok := v.(map[string]any); !ok {
			return nil, errdefs.InvalidArgument("arguments must be a JSON object, got %s", describe(v))
		}
	}
	w := &walk{}
	if msg := s.check(v, "", w); msg != "" {
		return nil, errdefs.InvalidArgument("%s", msg)
	}
	if !w.rewritten {
		return args, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, errdefs.Internal("arguments could not be re-encoded: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// walk is what one validation pass found besides errors.
type walk struct {
	rewritten bool // an integer was rewritten in place (see Normalize)
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

// check returns "" when v is valid, otherwise the error message. at is the
// field path ("" for the top level).
func (s *Schema) check(v any, at string, w *walk) string {
	if len(s.types) > 0 && !s.typeOK(v) {
		return fmt.Sprintf("%s must be %s, got %s", subject(at), typeNames(s.types), describe(v))
	}
	if len(s.enum) > 0 && !slices.ContainsFunc(s.enum, func(e any) bool { return equal(e, v) }) {
		return fmt.Sprintf("%s must be one of %s, got %s", subject(at), enumList(s.enum), describe(v))
	}
	switch t := v.(type) {
	case map[string]any:
		return s.checkObject(t, at, w)
	case []any:
		return s.checkArray(t, at, w)
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
		return s.bounds.check(t, at)
	}
	return ""
}

// canonical returns v rewritten as a plain integer when the schema wants an
// integer and v spells one otherwise (3.0, 1e2).
func (s *Schema) canonical(v any) (json.Number, bool) {
	n, ok := v.(json.Number)
	if !ok || !s.allows("integer") || s.allows("number") || plainInt(n) {
		return "", false
	}
	return canonicalInt(n)
}

func (s *Schema) checkObject(m map[string]any, at string, w *walk) string {
	var missing []string
	for _, r := range s.required {
		if _, ok := m[r]; !ok {
			missing = append(missing, r)
		}
	}
	// Unknown arguments are named before missing ones: {"file": "x"} for a
	// tool that takes path is one misspelt argument, and "missing path"
	// alone would leave the model guessing what was wrong with file.
	if s.closed {
		var unknown []string
		for k := range m {
			if _, ok := s.properties[k]; !ok {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return s.unknownSentence(m, at, unknown, missing)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("missing required argument %q", join(at, missing[0]))
	}
	// Declared order first, so the first problem reported is the first one
	// the author listed.
	for _, name := range s.order {
		val, ok := m[name]
		if !ok {
			continue
		}
		p := s.properties[name]
		if msg := p.check(val, join(at, name), w); msg != "" {
			return msg
		}
		if n, ok := p.canonical(val); ok {
			m[name], w.rewritten = n, true
		}
	}
	return ""
}

// unknownSentence names the unknown arguments, what each most likely meant
// (among the declared arguments not given), the known ones, and the
// required ones still missing that no suggestion covers.
func (s *Schema) unknownSentence(m map[string]any, at string, unknown, missing []string) string {
	var free []string
	for _, name := range s.order {
		if _, given := m[name]; !given {
			free = append(free, name)
		}
	}
	// A call may carry any number of keys of any length: the error message
	// names the first few, each clipped.
	const maxNamed = 5
	var quoted, meant []string
	covered := map[string]bool{}
	for _, u := range unknown[:min(len(unknown), maxNamed)] {
		name := quoteClip(join(at, u), 64)
		quoted = append(quoted, name)
		c := suggest(u, slices.DeleteFunc(slices.Clone(free), func(f string) bool { return covered[f] }))
		if c == "" {
			continue
		}
		covered[c] = true
		if len(unknown) == 1 {
			meant = append(meant, strconv.Quote(join(at, c)))
		} else {
			meant = append(meant, fmt.Sprintf("%q for %s", join(at, c), name))
		}
	}
	if n := len(unknown) - maxNamed; n > 0 {
		quoted = append(quoted, fmt.Sprintf("and %d more", n))
	}
	word := "argument"
	if len(unknown) > 1 {
		word = "arguments"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "unknown %s %s", word, strings.Join(quoted, ", "))
	if len(meant) > 0 {
		fmt.Fprintf(&b, "; did you mean %s?", strings.Join(meant, " and "))
	}
	if len(s.order) > 0 {
		fmt.Fprintf(&b, " (known: %s)", joinNames(s.order))
	} else {
		b.WriteString(" (it takes none)")
	}
	var still []string
	for _, r := range missing {
		if !covered[r] {
			still = append(still, strconv.Quote(join(at, r)))
		}
	}
	switch len(still) {
	case 0:
	case 1:
		fmt.Fprintf(&b, "; the required argument %s is missing", still[0])
	default:
		fmt.Fprintf(&b, "; the required arguments %s are missing", strings.Join(still, ", "))
	}
	return b.String()
}

func (s *Schema) checkArray(list []any, at string, w *walk) string {
	if s.minItems != nil && len(list) < *s.minItems {
		return fmt.Sprintf("%s must have at least %d items, got %d", subject(at), *s.minItems, len(list))
	}
	if s.maxItems != nil && len(list) > *s.maxItems {
		return fmt.Sprintf("%s must have at most %d items, got %d", subject(at), *s.maxItems, len(list))
	}
	if s.items != nil {
		for i, e := range list {
			if msg := s.items.check(e, fmt.Sprintf("%s[%d]", at, i), w); msg != "" {
				return msg
			}
			if n, ok := s.items.canonical(e); ok {
				list[i], w.rewritten = n, true
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
	if plainInt(n) {
		return true
	}
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
