package api

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestUnmarshalStrict(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{``, []string{"empty"}},
		{`{"conversation": "c1",}`, []string{"not valid JSON", "offset 23"}},
		{`{"conversation": "c1"`, []string{"ends in the middle"}},
		{`[1,2]`, []string{"JSON array, not an object"}},
		{`"x"`, []string{"JSON string, not an object"}},
		{`null`, []string{"JSON null, not an object"}},
		{`{"conversation": 5}`, []string{`field "conversation"`, "a string", "not a JSON number"}},
		{`{"conversation": "c", "resources": {"cpus": "two"}}`, []string{`field "resources.cpus"`, "a number", "string"}},
		{`{"conversation": "c", "resources": {"pids": 1.5}}`, []string{`"resources.pids"`, "whole number"}},
		{`{"conversation": "c", "resources": []}`, []string{`"resources"`, "an object", "array"}},
		{`{"conversation": "c", "netwrok": "none"}`, []string{`field "netwrok" is not known`}},
		{`{"conversation": "c", "workspace": {"path": "/x"}}`, []string{`"path" is not known`}},
		{`{"conversation": "c"} {"x": 1}`, []string{"more data after the JSON object"}},
		{`{"conversation": "c"} x`, []string{"more data after the JSON object"}},
	} {
		var req CreateSandboxRequest
		err := unmarshalStrict([]byte(tc.body), &req)
		if err == nil {
			t.Errorf("%s: no error", tc.body)
			continue
		}
		if StatusOf(err) != 400 || errdefs.Code(err) != "invalid_argument" {
			t.Errorf("%s: class %s", tc.body, errdefs.Code(err))
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.body, err, w)
			}
		}
	}
	var req CreateSandboxRequest
	if err := unmarshalStrict([]byte(` {"conversation": "c1", "env": {"A": "b"}} `+"\n"), &req); err != nil || req.Conversation != "c1" || req.Env["A"] != "b" {
		t.Errorf("good body: %+v %v", req, err)
	}
}
