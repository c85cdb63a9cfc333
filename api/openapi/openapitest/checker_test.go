package openapitest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api/openapi"
	"github.com/sandboxd/sandboxd/api/openapi/openapitest"
)

type thing struct {
	ID   string    `json:"id"`
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

type failure struct {
	Message string `json:"message"`
}

func checker(t *testing.T) *openapitest.Checker {
	t.Helper()
	doc, err := openapi.Build(openapi.Spec{Info: openapi.Info{Title: "t", Version: "1"}, ErrorBody: failure{}, Routes: []openapi.Route{
		{Method: "GET", Path: "/v1/things/{id}", ID: "get", Errors: []int{404},
			Responses: []openapi.Response{{Status: 200, Body: thing{}, Events: []openapi.Event{{Name: "thing", Data: thing{}}}}}},
		{Method: "DELETE", Path: "/v1/things/{id}", ID: "del", Responses: []openapi.Response{{Status: 204}}},
		{Method: "GET", Path: "/v1/things/special", ID: "special", Responses: []openapi.Response{{Status: 200, Body: []string{}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := doc.JSON()
	c, err := openapitest.New(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheck(t *testing.T) {
	c := checker(t)
	good := `{"id":"a","at":"2024-05-01T10:00:00Z"}`
	for _, tc := range []struct {
		name, method, path string
		status             int
		ct, body           string
		ok                 bool
	}{
		{"fits", "GET", "/v1/things/a", 200, "application/json", good, true},
		{"optional field", "GET", "/v1/things/a", 200, "application/json; charset=utf-8", `{"id":"a","at":"2024-05-01T10:00:00Z","note":"n"}`, true},
		{"error body", "GET", "/v1/things/a", 404, "application/json", `{"message":"no"}`, true},
		{"default error", "GET", "/v1/things/a", 500, "application/json", `{"message":"bug"}`, true},
		{"no body", "DELETE", "/v1/things/a", 204, "", "", true},
		{"literal beats wildcard", "GET", "/v1/things/special", 200, "application/json", `["x"]`, true},

		{"missing field", "GET", "/v1/things/a", 200, "application/json", `{"id":"a"}`, false},
		{"wrong type", "GET", "/v1/things/a", 200, "application/json", `{"id":1,"at":"2024-05-01T10:00:00Z"}`, false},
		{"extra field", "GET", "/v1/things/a", 200, "application/json", `{"id":"a","at":"2024-05-01T10:00:00Z","x":1}`, false},
		{"not a date-time", "GET", "/v1/things/a", 200, "application/json", `{"id":"a","at":"yesterday"}`, false},
		{"null for an array", "GET", "/v1/things/special", 200, "application/json", `null`, false},
		{"error body for an answer", "GET", "/v1/things/a", 200, "application/json", `{"message":"no"}`, false},
		{"answer for an error", "GET", "/v1/things/a", 404, "application/json", good, false},
		{"wrong content type", "GET", "/v1/things/a", 200, "text/plain", good, false},
		{"not JSON", "GET", "/v1/things/a", 200, "application/json", `{"id":`, false},
		{"body where none", "DELETE", "/v1/things/a", 204, "application/json", good, false},
		{"undocumented status", "DELETE", "/v1/things/a", 200, "", "", false},
		{"undocumented method", "PUT", "/v1/things/a", 200, "application/json", good, false},
		{"undocumented path", "GET", "/v1/other", 200, "application/json", good, false},
	} {
		err := c.Check(tc.method, tc.path, tc.status, tc.ct, []byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%s: ok %v, error %v", tc.name, tc.ok, err)
		}
	}
}

func TestCheckEvent(t *testing.T) {
	c := checker(t)
	if err := c.CheckEvent("GET", "/v1/things/a", 200, "thing", []byte(`{"id":"a","at":"2024-05-01T10:00:00Z"}`)); err != nil {
		t.Error(err)
	}
	if err := c.CheckEvent("GET", "/v1/things/a", 200, "thing", []byte(`{"id":"a"}`)); err == nil {
		t.Error("an event missing a required field passed")
	}
	if err := c.CheckEvent("GET", "/v1/things/a", 200, "other", []byte(`{}`)); err == nil {
		t.Error("an event the document does not name passed")
	}
}

// TestTransportReportsAMismatch serves a deliberately wrong body and
// stream: the transport must report each, and pass the response on intact.
func TestTransportReportsAMismatch(t *testing.T) {
	c := checker(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Accept") == "text/event-stream":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": hi\n\nevent: thing\ndata: {\"id\":\"a\",\"at\":\"2024-05-01T10:00:00Z\"}\n\nevent: thing\ndata: {\"id\":2}\n\nevent: surprise\ndata: {}\n\n")
		case r.URL.Path == "/v1/things/good":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"a","at":"2024-05-01T10:00:00Z"}`)
		case r.URL.Path == "/v1/nowhere":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"message":"no such endpoint"}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"a","at":"2024-05-01T10:00:00Z","surplus":true}`)
		}
	}))
	defer srv.Close()
	var problems []string
	hc := &http.Client{Transport: c.Transport(nil, "/v1/", func(err error) { problems = append(problems, err.Error()) })}
	get := func(path, accept string) string {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if body := get("/v1/things/good", ""); !strings.Contains(body, `"id":"a"`) || len(problems) != 0 {
		t.Fatalf("a good answer: body %q, problems %v", body, problems)
	}
	get("/v1/nowhere", "")
	if len(problems) != 0 {
		t.Fatalf("an unknown endpoint's 404 was reported: %v", problems)
	}
	if body := get("/v1/things/bad", ""); !strings.Contains(body, "surplus") {
		t.Errorf("the caller did not get the body: %q", body)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "surplus") {
		t.Fatalf("a body with an undocumented field: problems %v", problems)
	}
	problems = nil
	get("/v1/things/s", "text/event-stream")
	if len(problems) != 2 || !strings.Contains(problems[0], `"thing"`) || !strings.Contains(problems[1], "surprise") {
		t.Fatalf("a stream with a bad event and an unknown one: problems %v", problems)
	}
}
