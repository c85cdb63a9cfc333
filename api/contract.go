package api

import (
	"encoding/json"
	"net/http"
	"regexp"

	"github.com/sandboxd/sandboxd/api/mcp"
	"github.com/sandboxd/sandboxd/api/openapi"
	"github.com/sandboxd/sandboxd/questions"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/callrec"
)

// This file is the contract as a document: the route table that
// GET /v1/openapi.json is generated from, beside routes() in server.go.

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

// Contract is the table of API v1 for its OpenAPI document: every /v1
// route of routes() has its entry here (a test walks the registrations).
func Contract() openapi.Spec {
	const (
		sb, runs, qs, ops, mcpTag = "sandboxes", "runs", "questions", "operations", "mcp"
	)
	bad, unauth, missing, conflict, precond, exhausted, unavail, timeout := 400, 401, 404, 409, 412, 429, 503, 504
	accept := openapi.Param{Name: "Accept", Description: "text/event-stream asks for the answer as a Server-Sent Events stream."}
	toolArgs := &openapi.Schema{Type: "object", Description: "The tool's own arguments: an object fitting the input_schema of the tool's ToolSpec (GET /v1/runs/{id}/tools). An empty body is {}."}
	return openapi.Spec{
		Info: openapi.Info{Title: "sandboxd API", Version: "v1",
			Description: "Sandboxes, agent runs and their tools, and the questions a run puts to people (docs/DESIGN.md §3). Errors answer {\"error\": {\"code\", \"message\"}}."},
		ErrorBody: ErrorBody{},
		Routes: []openapi.Route{
			{Method: "POST", Path: "/v1/sandboxes", ID: "createSandbox", Tags: []string{sb}, Summary: "Create the conversation's sandbox.",
				Body: CreateSandboxRequest{}, Responses: []openapi.Response{{Status: 201, Body: Sandbox{}}},
				Errors: []int{bad, unauth, conflict, exhausted, unavail}},
			{Method: "GET", Path: "/v1/sandboxes", ID: "listSandboxes", Tags: []string{sb}, Summary: "List the tenant's sandboxes.",
				Query:     []openapi.Param{{Name: "conversation", Description: "Only this conversation's sandboxes."}},
				Responses: []openapi.Response{{Status: 200, Body: []Sandbox{}}}, Errors: []int{bad, unauth}},
			{Method: "GET", Path: "/v1/sandboxes/{id}", ID: "getSandbox", Tags: []string{sb}, Summary: "Get a sandbox.",
				Responses: []openapi.Response{{Status: 200, Body: Sandbox{}}}, Errors: []int{unauth, missing}},
			{Method: "GET", Path: "/v1/sandboxes/{id}/stats", ID: "sandboxStats", Tags: []string{sb}, Summary: "A sandbox's state and resource use as the engine reports it.",
				Responses: []openapi.Response{{Status: 200, Body: SandboxStats{}}}, Errors: []int{unauth, missing, unavail}},
			{Method: "GET", Path: "/v1/whoami", ID: "whoami", Tags: []string{ops}, Summary: "The tenant the token belongs to.",
				Responses: []openapi.Response{{Status: 200, Body: WhoAmI{}}}, Errors: []int{unauth}},
			{Method: "DELETE", Path: "/v1/sandboxes/{id}", ID: "deleteSandbox", Tags: []string{sb}, Summary: "Stop everything in a sandbox and remove it.",
				Responses: []openapi.Response{{Status: 204, Description: "Removed."}}, Errors: []int{unauth, missing, unavail}},

			{Method: "POST", Path: "/v1/runs", ID: "createRun", Tags: []string{runs}, Summary: "Start an agent run in a conversation.",
				Body: CreateRunRequest{}, Responses: []openapi.Response{{Status: 201, Body: Run{}}},
				Errors: []int{bad, unauth, missing, exhausted, unavail}},
			{Method: "GET", Path: "/v1/runs", ID: "listRuns", Tags: []string{runs}, Summary: "List the tenant's live runs.",
				Responses: []openapi.Response{{Status: 200, Body: []RunSummary{}}}, Errors: []int{unauth}},
			{Method: "GET", Path: "/v1/runs/{id}", ID: "getRun", Tags: []string{runs}, Summary: "Get a run with its current tool list.",
				Responses: []openapi.Response{{Status: 200, Body: Run{}}}, Errors: []int{unauth, missing, unavail}},
			{Method: "GET", Path: "/v1/runs/{id}/tools", ID: "listTools", Tags: []string{runs}, Summary: "The tools the run sees, ready to hand to a model.",
				Responses: []openapi.Response{{Status: 200, Body: []ToolSpec{}}}, Errors: []int{unauth, missing, unavail}},
			{Method: "POST", Path: "/v1/runs/{id}/tools/{name}", ID: "callTool", Tags: []string{runs}, Summary: "Call a tool.",
				Description: "What the model should read (bad arguments, a refused approval) is a 200 with is_error. With Accept: text/event-stream the answer is a stream of output events and one result (or error) event; what fails before the stream began keeps its status and JSON error body.",
				Headers:     []openapi.Param{accept}, BodySchema: toolArgs, BodyOptional: true,
				Responses: []openapi.Response{{Status: 200, Body: ToolResult{},
					StreamDesc: "Server-Sent Events: output while the tool runs, `: heartbeat` comments while it is silent, then exactly one result or error event.",
					Events: []openapi.Event{
						{Name: EventOutput, Data: OutputEvent{}, Description: "Text the tool printed."},
						{Name: EventResult, Data: ToolResult{}, Description: "The result, byte for byte a plain call's answer; the last event."},
						{Name: EventError, Data: StreamError{}, Description: "An error after the stream began, with the status a plain call would have had; the last event."},
					}}},
				Errors: []int{bad, unauth, missing, precond, unavail, timeout}},
			{Method: "GET", Path: "/v1/runs/{id}/calls", ID: "listCalls", Tags: []string{runs}, Summary: "The run's recent tool calls, oldest first (the console's live view).",
				Description: "With Accept: text/event-stream the answer is a stream: the recent calls, then each call as it finishes, one call event each. A reader more than 64 calls behind loses its stream; it reconnects and skips what it has by seq.",
				Headers:     []openapi.Param{accept},
				Responses: []openapi.Response{{Status: 200, Body: []callrec.Call{},
					StreamDesc: "Server-Sent Events: call, with `: heartbeat` comments.",
					Events:     []openapi.Event{{Name: "call", Data: callrec.Call{}, Description: "A finished call."}}}},
				Errors: []int{unauth, missing, unavail}},
			{Method: "DELETE", Path: "/v1/runs/{id}", ID: "deleteRun", Tags: []string{runs}, Summary: "End a run, its children and its workers.",
				Responses: []openapi.Response{{Status: 204, Description: "Ended."}}, Errors: []int{unauth, missing, unavail}},
			{Method: "POST", Path: "/v1/runs/{id}/mcp", ID: "mcpPost", Tags: []string{mcpTag}, Summary: "The run's tools over MCP (streamable HTTP).",
				Description: "A JSON-RPC message (or, in a 2025-03-26 session, a batch) of the Model Context Protocol: initialize, ping, tools/list, tools/call and notifications. The answer is JSON-RPC as JSON, or as a text/event-stream of message events when the client accepts only that. initialize issues the Mcp-Session-Id header every later request carries. What the transport refuses is answered with a JSON-RPC error object; what the API refuses first (the token, the run) with the error body.",
				Headers: []openapi.Param{accept, {Name: mcp.HeaderSession, Description: "The session initialize issued."},
					{Name: mcp.HeaderProtocol, Description: "The protocol revision the session negotiated."}},
				BodySchema: &openapi.Schema{Type: []string{"object", "array"}, Description: "JSON-RPC 2.0."},
				Responses: append([]openapi.Response{{Status: 200, Schema: &openapi.Schema{Type: []string{"object", "array"}, Description: "JSON-RPC 2.0."},
					Events: []openapi.Event{{Name: "message", Data: json.RawMessage(nil), Description: "A JSON-RPC message."}}},
					{Status: 202, Description: "A notification or response, accepted."}},
					mcpErrors(400, 403, 404, 406, 415, 429)...),
				Errors: []int{unauth}},
			{Method: "GET", Path: "/v1/runs/{id}/mcp", ID: "mcpGet", Tags: []string{mcpTag}, Summary: "No server-initiated stream: always 405, as the transport allows.",
				Responses: mcpErrors(404, 405), Errors: []int{unauth}},
			{Method: "DELETE", Path: "/v1/runs/{id}/mcp", ID: "mcpDelete", Tags: []string{mcpTag}, Summary: "End an MCP session.",
				Headers:   []openapi.Param{{Name: mcp.HeaderSession, Description: "The session to end.", Required: true}},
				Responses: append([]openapi.Response{{Status: 204, Description: "Ended."}}, mcpErrors(400, 404)...),
				Errors:    []int{unauth}},

			{Method: "GET", Path: "/v1/spaces/{space}/questions", ID: "listQuestions", Tags: []string{qs}, Summary: "The space's pending questions.",
				Description: "With Accept: text/event-stream the answer is a stream: the pending questions as question events, then question and resolved events as they happen. While a stream is open, a human is connected to the space.",
				Headers:     []openapi.Param{accept},
				Responses: []openapi.Response{{Status: 200, Body: []Question{},
					StreamDesc: "Server-Sent Events: question and resolved, with `: heartbeat` comments.",
					Events: []openapi.Event{
						{Name: "question", Data: Question{}, Description: "A question put to the space."},
						{Name: "resolved", Data: Resolution{}, Description: "A question that ended."},
					}}},
				Errors: []int{bad, unauth, unavail}},
			{Method: "POST", Path: "/v1/questions/{id}/answer", ID: "answerQuestion", Tags: []string{qs}, Summary: "Answer or skip a question.",
				Body: Answer{}, Responses: []openapi.Response{{Status: 200, Body: AnswerResult{}}},
				Errors: []int{bad, unauth, missing, conflict, unavail}},

			{Method: "GET", Path: openAPIPath, ID: "openAPI", Tags: []string{ops}, Public: true, Summary: "This document.",
				Responses: []openapi.Response{{Status: 200, Schema: &openapi.Schema{Type: "object", Description: "An OpenAPI 3.1 document."}}}},
			{Method: "GET", Path: "/healthz", ID: "healthz", Tags: []string{ops}, Public: true, Summary: "Liveness.",
				Responses: []openapi.Response{{Status: 200, Body: Status{}}}},
			{Method: "GET", Path: "/readyz", ID: "readyz", Tags: []string{ops}, Public: true, Summary: "Readiness: 503 while the sandbox engine does not answer.",
				Responses: []openapi.Response{{Status: 200, Body: ReadyStatus{}}}, Errors: []int{unavail}},
			{Method: "GET", Path: "/metrics", ID: "metrics", Tags: []string{ops}, Public: true, Summary: "Prometheus metrics.",
				Responses: []openapi.Response{{Status: 200, ContentType: "text/plain", Schema: &openapi.Schema{Type: "string"}}}},
		},
	}
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
		openapi.WithField(Sandbox{}, "state", openapi.Enum(sandbox.StateRunning, sandbox.StateStopped, sandbox.StatePaused, sandbox.StateGone)),
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
