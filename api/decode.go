package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Oversized bodies get 400 invalid_argument rather than 413 (not in the
// contract's list) or 429 (which says "retry later", and a retry of the same
// body can never succeed).

// readBody reads at most limit bytes of r's body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	paced, _ := r.Body.(*pacedBody)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, errdefs.InvalidArgument("request body is larger than %d bytes; send a smaller body", limit)
	case errors.Is(err, errBodyTooSlow) && paced != nil:
		// The connection's read side is spent: respond, then close it.
		w.Header().Set("Connection", "close")
		return nil, errdefs.InvalidArgument("%s", paced.tooSlow())
	case err != nil:
		return nil, errdefs.InvalidArgument("request body could not be read: %v; send it again", err)
	}
	if paced != nil {
		paced.finish()
	}
	return body, nil
}

// decodeJSON reads one JSON object into v. Unknown fields, wrong types,
// malformed JSON and trailing data are errors naming the field or offset.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return unmarshalStrict(body, v)
}

func unmarshalStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errdefs.InvalidArgument("request body is empty; send a JSON object")
	}
	if err := checkObject(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if dec.More() {
		return errdefs.InvalidArgument("request body has more data after the JSON object at byte offset %d; send exactly one JSON object", dec.InputOffset())
	}
	return nil
}

// checkObject checks that body is exactly one well-formed JSON object.
func checkObject(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return describeJSONError(err)
	}
	if raw[0] != '{' {
		return errdefs.InvalidArgument("request body is a JSON %s, not an object; send a JSON object such as {\"key\": \"value\"}", jsonKind(raw[0]))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errdefs.InvalidArgument("request body has more data after the JSON object at byte offset %d; send exactly one JSON object", dec.InputOffset())
	}
	return nil
}

func describeJSONError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return errdefs.InvalidArgument("request body is not valid JSON at byte offset %d (%s); fix the JSON and send it again",
			se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errdefs.InvalidArgument("request body ends in the middle of the JSON; send the complete JSON object")
	case errors.As(err, &te):
		if te.Field == "" {
			return errdefs.InvalidArgument("request body is a JSON %s where an object is expected; send a JSON object", te.Value)
		}
		return errdefs.InvalidArgument("field %q must be %s, not a JSON %s", te.Field, typeWord(te.Type.Kind().String()), te.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errdefs.InvalidArgument("field %s is not known; remove it or check its spelling against the API documentation", f)
	}
	return errdefs.InvalidArgument("request body could not be decoded: %v; send a JSON object as documented", strings.TrimPrefix(err.Error(), "json: "))
}

func typeWord(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "map", "struct", "ptr":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return fmt.Sprintf("of type %s", kind)
}

func jsonKind(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
