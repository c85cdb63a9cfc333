package api

import (
	"net/http"
	"regexp"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/api/openapi"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
)

// This file is the contract as a document: GET /v1/openapi.json, built
// from the route table in routes.go.

// openAPIHandler serves the document of Contract() as this mux has it
// (an endpoint the mux does not serve is left out), built once here. It is
// public: the contract is no secret, and clients read it before they have
// a token.
func openAPIHandler(mux *http.ServeMux) http.Handler {
	b, err := OpenAPI(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err != nil {
			// Only a bug in the table gets here; its test fails first.
			writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: ErrorDetail{Code: "internal",
				Message: "the OpenAPI document could not be built (" + err.Error() + "); this is a bug in sandboxd"}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
	})
}

// OpenAPI is the OpenAPI 3.1 document of API v1 as JSON: the routes of
// Contract() that mux serves (nil: all of them), their bodies described
// from the Go types the handlers use.
func OpenAPI(mux *http.ServeMux) ([]byte, error) {
	spec := Contract()
	if mux != nil {
		var served []openapi.Route
		for _, rt := range spec.Routes {
			if rt.Path == openAPIPath || servesRoute(mux, rt) {
				served = append(served, rt)
			}
		}
		spec.Routes = served
	}
	doc, err := openapi.Build(spec, contractTypes()...)
	if err != nil {
		return nil, err
	}
	return doc.JSON()
}

// openAPIPath is where the document is served.
const openAPIPath = "/v1/openapi.json"

// servesRoute reports whether mux routes rt to rt's own pattern (not to
// the catch-all), with each {wildcard} standing for a sample segment.
func servesRoute(mux *http.ServeMux, rt openapi.Route) bool {
	path := contractWildcard.ReplaceAllString(rt.Path, "x")
	req, err := http.NewRequest(rt.Method, path, nil)
	if err != nil {
		return false
	}
	_, pattern := mux.Handler(req)
	return pattern == rt.Method+" "+rt.Path
}

// mcpErrors are the MCP endpoint's refusals: a JSON-RPC error object from
// the transport, or the API's error body when the run itself is refused.
func mcpErrors(statuses ...int) []openapi.Response {
	rpc := &openapi.Schema{Type: "object", Required: []string{"jsonrpc", "error"}, Properties: map[string]*openapi.Schema{
		"jsonrpc": {Type: "string", Enum: []any{"2.0"}},
		"id":      {Description: "The request's id, or null."},
		"error": {Type: "object", Required: []string{"code", "message"}, Properties: map[string]*openapi.Schema{
			"code":    {Type: "integer"},
			"message": {Type: "string"},
			"data":    {},
		}},
	}}
	either := &openapi.Schema{AnyOf: []*openapi.Schema{{Ref: "#/components/schemas/ErrorBody"}, rpc}}
	out := make([]openapi.Response, 0, len(statuses))
	for _, st := range statuses {
		out = append(out, openapi.Response{Status: st, Description: http.StatusText(st) + ": a JSON-RPC error, or the error body.", Schema: either})
	}
	return out
}

var contractWildcard = regexp.MustCompile(`\{[^}]*\}`)

// Contract is the table of API v1 for its OpenAPI document: the routes of
// the route table (routes.go) that are part of the contract.
func Contract() openapi.Spec {
	spec := openapi.Spec{
		Info: openapi.Info{Title: "sandboxd API", Version: "v1",
			Description: "Sandboxes, agent runs and their tools, and the questions a run puts to people (docs/DESIGN.md §3). Errors answer {\"error\": {\"code\", \"message\"}}."},
		ErrorBody: ErrorBody{},
	}
	for _, rt := range routeTable() {
		if !rt.noDoc {
			spec.Routes = append(spec.Routes, rt.Route)
		}
	}
	return spec
}

// contractTypes says what the Go types cannot: enums and descriptions.
func contractTypes() []openapi.Option {
	surface := openapi.Enum(tools.SurfaceDefault, tools.SurfacePlan, tools.SurfaceReadonly)
	approval := openapi.Enum(ApprovalAuto, ApprovalAsk)
	return []openapi.Option{
		openapi.WithName(QuestionOption{}, "QuestionOption"),
		openapi.WithName(ToolSpec{}, "ToolSpec"),
		openapi.WithName(ToolResult{}, "ToolResult"),
		openapi.WithField(CreateSandboxRequest{}, "network", openapi.Enum("none", "bridge")),
		openapi.WithField(CreateSandboxRequest{}, "runtime", openapi.Enum(sandbox.RuntimeRunc, sandbox.RuntimeGVisor)),
		openapi.WithField(Sandbox{}, "runtime", openapi.Enum(sandbox.RuntimeRunc, sandbox.RuntimeGVisor)),
		openapi.WithField(Sandbox{}, "state", openapi.Enum(sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateStopped, sandbox.StateGone)),
		openapi.WithField(Process{}, "state", openapi.Enum(proto.ProcRunning, proto.ProcExited, proto.ProcKilled, proto.ProcStopped)),
		openapi.WithField(CreateRunRequest{}, "surface", surface),
		openapi.WithField(CreateRunRequest{}, "approval", approval),
		openapi.WithField(Run{}, "surface", surface),
		openapi.WithField(Run{}, "approval", approval),
		openapi.WithField(RunSummary{}, "surface", surface),
		openapi.WithField(RunSummary{}, "approval", approval),
		openapi.WithType(tools.Level(""), openapi.Enum(tools.LevelRead, tools.LevelWrite, tools.LevelExec)),
		openapi.WithField(ToolSpec{}, "input_schema", func(s *openapi.Schema) {
			s.Type, s.Description = "object", "A JSON Schema of the tool's arguments."
		}),
		openapi.WithField(Block{}, "type", openapi.Enum("text", "image")),
		openapi.WithField(Block{}, "data", openapi.Describe("Base64 of an image block.")),
		openapi.WithField(OutputEvent{}, "stream", openapi.Enum("stdout", "stderr")),
		openapi.WithField(Question{}, "kind", openapi.Enum(questions.KindQuestion, questions.KindPermission)),
		openapi.WithField(Question{}, "options", openapi.Describe("Numbered from 1 in answers.")),
		openapi.WithField(AnswerResult{}, "status", openapi.Enum(questions.StatusAnswered, questions.StatusSkipped)),
		openapi.WithField(Resolution{}, "status", openapi.Enum(questions.StatusAnswered, questions.StatusSkipped,
			questions.StatusExpired, questions.StatusCanceled, questions.StatusWithdrawn)),
		openapi.WithField(ReadyStatus{}, "status", openapi.Enum("ok", "degraded")),
		openapi.WithField(ErrorDetail{}, "code", openapi.Describe("The error's class: invalid_argument, unauthenticated, not_found, conflict, failed_precondition, resource_exhausted, internal, unavailable, deadline_exceeded.")),
		openapi.WithField(ErrorDetail{}, "message", openapi.Describe("One sentence for a person: what was wrong and what to do.")),
	}
}
