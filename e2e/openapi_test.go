package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandboxd/sandboxd/api"
)

// TestOpenAPIDocument reads GET /v1/openapi.json as a client would: no
// token, JSON, valid OpenAPI 3.1, every route of the table in it.
func TestOpenAPIDocument(t *testing.T) {
	d := startDaemon(t, "host", t.TempDir())
	resp, err := http.Get(d.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json without a token: %d %s: %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}

	f, err := os.Open("../api/openapi/testdata/oas-3.1-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AddResource("oas-3.1.json", meta)
	schema, err := c.Compile("oas-3.1.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("the served document is not OpenAPI 3.1: %v", err)
	}

	var paths struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	json.Unmarshal(b, &paths)
	for _, rt := range api.Contract().Routes {
		// A trailing wildcard ({path...}) is an ordinary parameter in the document.
		docPath := strings.ReplaceAll(rt.Path, "...}", "}")
		if _, ok := paths.Paths[docPath][strings.ToLower(rt.Method)]; !ok && !rt.Planned && rt.Path != "/metrics" {
			t.Errorf("the document has no %s %s", rt.Method, rt.Path)
		}
	}
}

// TestOpenAPILiveStreams makes the two streams of the API on the host
// backend; the harness checks each event against the document.
func TestOpenAPILiveStreams(t *testing.T) {
	d := startDaemon(t, "host", t.TempDir())
	if _, err := d.Client.CreateSandbox(ctx(t), createReq("host", "conv-oas")); err != nil {
		t.Fatal(err)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-oas", Space: "oas"})
	if err != nil {
		t.Fatal(err)
	}
	var printed string
	res, err := d.Client.CallToolStream(ctx(t), run.ID, "shell", json.RawMessage(`{"command":"echo out; echo err >&2"}`),
		func(ev api.OutputEvent) { printed += ev.Text })
	if err != nil || res.IsError {
		t.Fatalf("streamed shell: %v %+v", err, res)
	}
	if !strings.Contains(printed, "out") {
		t.Errorf("the stream printed %q, want the command's output", printed)
	}
	if _, err := d.Client.Questions(ctx(t), "oas"); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), time.Minute)
	defer cancel()
	events, err := d.Client.WatchQuestions(c, "oas")
	if err != nil {
		t.Fatal(err)
	}
	// Once the human is connected, ask_user puts a question on the space.
	asked := make(chan error, 1)
	go func() {
		_, err := d.Client.CallTool(c, run.ID, "ask_user", json.RawMessage(`{"question":"Which?","options":[{"label":"a","description":"first"}]}`))
		asked <- err
	}()
	for ev := range events {
		if ev.Question != nil {
			if _, err := d.Client.AnswerQuestion(c, ev.Question.ID, api.Answer{Choices: []int{1}}); err != nil {
				t.Fatal(err)
			}
		}
		if ev.Resolved != nil {
			break
		}
	}
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
}

// TestContractCheckCatchesAMismatch serves the real document with responses
// that break it: the harness's check must charge each to the daemon.
func TestContractCheckCatchesAMismatch(t *testing.T) {
	doc, err := api.OpenAPI(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/openapi.json":
			w.Header().Set("Content-Type", "application/json")
			w.Write(doc)
		case "/v1/sandboxes":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `[]`)
		case "/v1/runs":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `[{"id":"r1","surface":"default"}]`) // no conversation
		case "/v1/runs/r1/tools/shell":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: output\ndata: {\"stream\":\"stdlog\",\"text\":\"x\"}\n\nevent: result\ndata: {\"content\":[],\"is_error\":false}\n\n")
		}
	}))
	defer srv.Close()
	check := &contractCheck{base: contract.base, daemons: map[string]*daemon{}}
	d := &daemon{t: t, URL: srv.URL}
	if err := check.watch(d); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: check}
	for _, tc := range []struct{ method, path, accept string }{
		{"GET", "/v1/sandboxes", ""},
		{"GET", "/v1/runs", ""},
		{"POST", "/v1/runs/r1/tools/shell", "text/event-stream"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		req.Header.Set("Accept", tc.accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.problems) != 2 || !strings.Contains(d.problems[0], "conversation") || !strings.Contains(d.problems[1], "stdlog") {
		t.Fatalf("want the run without a conversation and the output of stream stdlog, got %d: %q", len(d.problems), d.problems)
	}
}
