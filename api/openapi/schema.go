package openapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// Schema is a JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1), the
// keywords sandboxd's document uses.
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Type                 any                `json:"type,omitempty"` // a name, or a list of names
	Format               string             `json:"format,omitempty"`
	Description          string             `json:"description,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties any                `json:"additionalProperties,omitempty"` // *Schema or false
	Items                *Schema            `json:"items,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
}

// refPrefix is where named schemas live in the document.
const refPrefix = "#/components/schemas/"

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// reflector turns Go types into schemas as encoding/json marshals them.
// Named struct types become components, referenced by $ref.
type reflector struct {
	names      map[string]string          // Go type name (pkgpath.Name) -> component name, overrides
	fields     map[fieldKey]func(*Schema) // edits of one property
	types      map[reflect.Type]func(*Schema)
	components map[string]*Schema
	seen       map[reflect.Type]string // struct type -> its component name
}

type fieldKey struct {
	t    reflect.Type
	name string // the JSON name
}

func newReflector() *reflector {
	return &reflector{
		names:      map[string]string{},
		fields:     map[fieldKey]func(*Schema){},
		types:      map[reflect.Type]func(*Schema){},
		components: map[string]*Schema{},
		seen:       map[reflect.Type]string{},
	}
}

// schemaOf is the schema of values of t.
func (r *reflector) schemaOf(t reflect.Type) *Schema {
	s := r.bare(t)
	if edit, ok := r.types[t]; ok && s.Ref == "" {
		edit(s)
	}
	return s
}

func (r *reflector) bare(t reflect.Type) *Schema {
	switch t {
	case timeType:
		return &Schema{Type: "string", Format: "date-time"}
	case rawType:
		return &Schema{} // any JSON value
	}
	switch t.Kind() {
	case reflect.Pointer:
		return r.schemaOf(t.Elem())
	case reflect.Bool:
		return &Schema{Type: "boolean"}
	case reflect.String:
		return &Schema{Type: "string"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &Schema{Type: "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		zero := 0.0
		return &Schema{Type: "integer", Minimum: &zero}
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &Schema{Type: "string", Format: "byte"} // []byte is base64
		}
		return &Schema{Type: "array", Items: r.schemaOf(t.Elem())}
	case reflect.Array:
		return &Schema{Type: "array", Items: r.schemaOf(t.Elem())}
	case reflect.Map:
		return &Schema{Type: "object", AdditionalProperties: r.schemaOf(t.Elem())}
	case reflect.Struct:
		return r.component(t)
	case reflect.Interface:
		return &Schema{}
	}
	panic("openapi: type " + t.String() + " has no JSON form")
}

// component registers the struct type t under its name and refers to it.
func (r *reflector) component(t reflect.Type) *Schema {
	if name, ok := r.seen[t]; ok {
		return &Schema{Ref: refPrefix + name}
	}
	name := r.nameOf(t)
	r.seen[t] = name
	// Closed: encoding/json writes no other property, and the server
	// refuses unknown ones in request bodies.
	obj := &Schema{Type: "object", Properties: map[string]*Schema{}, AdditionalProperties: false}
	r.components[name] = obj // before the fields: a type may refer to itself
	r.addFields(obj, t)
	if edit, ok := r.types[t]; ok {
		edit(obj)
	}
	if len(obj.Properties) == 0 {
		obj.Properties = nil
	}
	return &Schema{Ref: refPrefix + name}
}

// nameOf is t's component name: its Go name, or the override, and the
// package name before it when another type already took that name.
func (r *reflector) nameOf(t reflect.Type) string {
	if n, ok := r.names[t.PkgPath()+"."+t.Name()]; ok {
		return n
	}
	name := t.Name()
	if name == "" {
		name = "Anonymous"
	}
	if _, taken := r.components[name]; taken {
		pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
		name = strings.ToUpper(pkg[:1]) + pkg[1:] + name
	}
	for base, i := name, 2; ; i++ {
		if _, taken := r.components[name]; !taken {
			return name
		}
		name = base + string(rune('0'+i))
	}
}

// addFields adds t's exported fields as encoding/json sees them: the tag's
// name, "-" left out, embedded structs without a name promoted, omitempty
// and omitzero fields optional and every other one required (Go always
// writes it).
func (r *reflector) addFields(obj *Schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				r.addFields(obj, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" || !hasTag {
			name = f.Name
		}
		s := r.schemaOf(f.Type)
		if hasOpt(opts, "string") {
			s = &Schema{Type: "string"}
		}
		optional := hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero")
		if f.Type.Kind() == reflect.Pointer && !optional {
			s = nullable(s) // a nil pointer is written as null
		}
		if edit, ok := r.fields[fieldKey{t, name}]; ok {
			edit(s) // 2020-12 lets keywords stand beside $ref
		}
		obj.Properties[name] = s
		if !optional {
			obj.Required = append(obj.Required, name)
		}
	}
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// nullable is s or null.
func nullable(s *Schema) *Schema {
	if s.Ref == "" {
		if name, ok := s.Type.(string); ok {
			s.Type = []string{name, "null"}
			return s
		}
	}
	return &Schema{AnyOf: []*Schema{s, {Type: "null"}}}
}
