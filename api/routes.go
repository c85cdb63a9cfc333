package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/api/mcp"
	"github.com/sandboxd/sandboxd/api/openapi"
	"github.com/sandboxd/sandboxd/egress/gateway"
	"github.com/sandboxd/sandboxd/ports"
	"github.com/sandboxd/sandboxd/tools/callrec"
)

// This file is the route table of the API: every endpoint once, with its
// contract (the OpenAPI document is built from it, contract.go), its
// conversation scope (a replica's router sends a request to the replica
// that owns its conversation by it, package cluster) and its handler
// (routes() in server.go registers it).

// Scope says how a request finds the conversation it belongs to, and so
// which replica of a deployment serves it.
type Scope int

// The scopes. The zero Scope is no scope: a route must say which it has.
const (
	// ScopeNone belongs to no conversation: any replica serves it.
	ScopeNone Scope = iota + 1
	// ScopeRun belongs to the conversation of the run {id} in the path.
	ScopeRun
	// ScopeSandbox belongs to the conversation of the sandbox {id}.
	ScopeSandbox
	// ScopeBody belongs to the conversation the JSON body names in its
	// "conversation" field (the create calls).
	ScopeBody
	// ScopeSpace is a space's questions, {space} in the path: they live
	// on the replicas serving the runs that asked them, so the router
	// gathers them from every replica.
	ScopeSpace
	// ScopeQuestion is the question {id}, held by one replica: the router
	// tries it here, then at the others.
	ScopeQuestion
	// ScopePreview belongs to the conversation of the sandbox a preview
	// link's {token} names (ports.SandboxOf reads it without the key; the
	// owner checks it). A host-based preview's request is routed the same
	// way before any route matches.
	ScopePreview
	// ScopeSandboxHeader belongs to the conversation of the sandbox the
	// request's SandboxHeader names (the E2B API's requests into a
	// sandbox). A request to an E2B sandbox's host name is routed the same
	// way before any route matches.
	ScopeSandboxHeader
	// ScopeReplicas is every replica's part of one answer (the audit
	// record, a chain per replica): the router asks each and merges.
	ScopeReplicas
)

// SandboxHeader names the sandbox of a request routed ScopeSandboxHeader:
// E2B's SDK sends it with every request into a sandbox.
const SandboxHeader = "E2b-Sandbox-Id"

func (s Scope) String() string {
	switch s {
	case 0:
		return "no scope"
	case ScopeNone:
		return "none"
	case ScopeRun:
		return "by run"
	case ScopeSandbox:
		return "by sandbox"
	case ScopeBody:
		return "by body"
	case ScopeSpace:
		return "by space"
	case ScopeQuestion:
		return "by question"
	case ScopePreview:
		return "by preview token"
	case ScopeSandboxHeader:
		return "by sandbox header"
	case ScopeReplicas:
		return "every replica"
	}
	return "unknown scope " + strconv.Itoa(int(s))
}

// known reports whether s is one of the scopes.
func (s Scope) known() bool { return s >= ScopeNone && s <= ScopeReplicas }

// Route is one endpoint as a replica's router sees it.
type Route struct {
	Method string // "" for the catch-all, which takes every method
	Path   string // as in the mux pattern: "/v1/runs/{id}/tools/{name}"
	ID     string // the operationId, or a name of its own outside the contract
	Scope  Scope
}

// Pattern is the route's mux pattern.
func (r Route) Pattern() string {
	if r.Method == "" {
		return r.Path
	}
	return r.Method + " " + r.Path
}

// Routes is the route table: every endpoint the API serves (the ones a
// server serves only when configured, like /metrics, included).
func Routes() []Route {
	tab := routeTable()
	out := make([]Route, len(tab))
	for i, rt := range tab {
		out[i] = rt.public()
	}
	return out
}

// route is one entry of the table.
type route struct {
	openapi.Route // the contract: Method, Path, ID, bodies and responses
	scope         Scope
	// noDoc keeps the route out of the contract: the console's pages and
	// redirects, and the JSON 404 of an unknown path.
	noDoc bool
	// serve is the route's handler on s; nil when s does not serve it.
	serve func(s *Server) http.Handler
}

func (rt route) public() Route {
	return Route{Method: rt.Method, Path: rt.Path, ID: rt.ID, Scope: rt.scope}
}

// tenantMethod is a handler method run for an authenticated tenant.
type tenantMethod func(s *Server, w http.ResponseWriter, r *http.Request, tenant string) error

// authed serves h behind the bearer token check (Server.authed).
func authed(h tenantMethod) func(*Server) http.Handler {
	return func(s *Server) http.Handler {
		return s.authed(func(w http.ResponseWriter, r *http.Request, tenant string) error { return h(s, w, r, tenant) })
	}
}

// runAuthed serves h behind the check that also takes a token of the run
// in the path (Server.runAuthed).
func runAuthed(h tenantMethod) func(*Server) http.Handler {
	return func(s *Server) http.Handler {
		return s.runAuthed(func(w http.ResponseWriter, r *http.Request, tenant string) error { return h(s, w, r, tenant) })
	}
}

// public serves h with no token.
func public(h func(s *Server, w http.ResponseWriter, r *http.Request)) func(*Server) http.Handler {
	return func(s *Server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
	}
}

// fixed serves h, the same on every server.
func fixed(h http.Handler) func(*Server) http.Handler {
	return func(*Server) http.Handler { return h }
}

// metricsHandler serves the gatherer; a server without one has no /metrics.
func (s *Server) metricsHandler() http.Handler {
	if s.gatherer == nil {
		return nil
	}
	return promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{})
}

// openAPIDoc serves the document of the routes this server's mux serves,
// built by routes() once the mux is complete.
func (s *Server) openAPIDoc() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.openAPI.ServeHTTP(w, r) })
}

// routeTable is every endpoint of the API. Patterns double as the closed
// set of values of the route label in metrics.
func routeTable() []route {
	const (
		sb, runs, qs, ops, mcpTag, procs = "sandboxes", "runs", "questions", "operations", "mcp", "processes"
	)
	bad, unauth, missing, conflict, precond, exhausted, unavail, timeout := 400, 401, 404, 409, 412, 429, 503, 504
	accept := openapi.Param{Name: "Accept", Description: "text/event-stream asks for the answer as a Server-Sent Events stream."}
	toolArgs := &openapi.Schema{Type: "object", Description: "The tool's own arguments: an object fitting the input_schema of the tool's ToolSpec (GET /v1/runs/{id}/tools). An empty body is {}."}
	redirect := func(to string, code int) func(*Server) http.Handler { return fixed(http.RedirectHandler(to, code)) }
	return []route{
		{scope: ScopeBody, serve: authed((*Server).createSandbox), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes", ID: "createSandbox", Tags: []string{sb}, Summary: "Create the conversation's sandbox.",
			Body: CreateSandboxRequest{}, Responses: []openapi.Response{{Status: 201, Body: Sandbox{}}},
			Errors: []int{bad, unauth, conflict, exhausted, unavail}}},
		{scope: ScopeNone, serve: authed((*Server).listSandboxes), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes", ID: "listSandboxes", Tags: []string{sb}, Summary: "List the tenant's sandboxes.",
			Query:     []openapi.Param{{Name: "conversation", Description: "Only this conversation's sandboxes."}},
			Responses: []openapi.Response{{Status: 200, Body: []Sandbox{}}}, Errors: []int{bad, unauth}}},
		{scope: ScopeNone, serve: authed((*Server).getSandbox), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}", ID: "getSandbox", Tags: []string{sb}, Summary: "Get a sandbox.",
			Responses: []openapi.Response{{Status: 200, Body: Sandbox{}}}, Errors: []int{unauth, missing}}},
		{scope: ScopeSandbox, serve: authed((*Server).sandboxStats), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/stats", ID: "sandboxStats", Tags: []string{sb}, Summary: "A sandbox's state and resource use as the engine reports it.",
			Responses: []openapi.Response{{Status: 200, Body: SandboxStats{}}}, Errors: []int{unauth, missing, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).pauseSandbox), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/pause", ID: "pauseSandbox", Tags: []string{sb}, Summary: "Freeze every process of a sandbox: kept in memory, no CPU.",
			Description: "Idempotent; a verb during another transition of the sandbox waits for it. Any call, process or preview request for a paused sandbox resumes it first.",
			Responses:   []openapi.Response{{Status: 200, Body: Sandbox{}}}, Errors: []int{unauth, missing, precond, unavail, timeout}}},
		{scope: ScopeSandbox, serve: authed((*Server).hibernateSandbox), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/hibernate", ID: "hibernateSandbox", Tags: []string{sb}, Summary: "Stop every process of a sandbox and free its memory, keeping its files.",
			Description: "The workspace and the sandbox's own file system changes are kept. Kernels, language servers and processes are stopped: processes are listed as stopped by hibernation, and the next eval says its kernel's state is gone. Any call resumes it first.",
			Responses:   []openapi.Response{{Status: 200, Body: Sandbox{}}}, Errors: []int{unauth, missing, precond, unavail, timeout}}},
		{scope: ScopeSandbox, serve: authed((*Server).resumeSandbox), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/resume", ID: "resumeSandbox", Tags: []string{sb}, Summary: "Bring a paused or hibernated sandbox back to running; it answers once its agent does.",
			Responses: []openapi.Response{{Status: 200, Body: Sandbox{}}}, Errors: []int{unauth, missing, precond, unavail, timeout}}},
		{scope: ScopeSandbox, serve: authed((*Server).createSnapshot), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/snapshots", ID: "createSnapshot", Tags: []string{sb}, Summary: "Take a snapshot of a sandbox's files at one consistent point.",
			Description: "The workspace and, where the engine can commit one, the sandbox's own file system changes, taken with the sandbox frozen for the moment it needs (never a torn copy of a file being written); the sandbox is left as it was. Processes and memory are not part of it.",
			Body:        CreateSnapshotRequest{}, Responses: []openapi.Response{{Status: 201, Body: Snapshot{}}}, Errors: []int{bad, unauth, missing, precond, unavail, timeout}}},
		{scope: ScopeSandbox, serve: authed((*Server).forkSandbox), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/fork", ID: "forkSandbox", Tags: []string{sb}, Summary: "Make one sandbox per conversation from one consistent point of a sandbox.",
			Description: "One snapshot is taken (kept, and listed) and each copy starts from it, independent afterwards; the source keeps running. A conversation that has a sandbox already is refused (409) before anything is copied. Copies that fail are listed in failed with why and leave no sandbox; when none could be made the snapshot is removed and the answer is the first one's error, naming every copy's reason.",
			Body:        ForkRequest{}, Responses: []openapi.Response{{Status: 201, Body: ForkResponse{}}}, Errors: []int{bad, unauth, missing, conflict, precond, exhausted, unavail, timeout}}},
		{scope: ScopeSandbox, serve: authed((*Server).getNetwork), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/network", ID: "getNetwork", Tags: []string{sb}, Summary: "A sandbox's network mode and, for proxy, its effective egress policy.",
			Responses: []openapi.Response{{Status: 200, Body: gateway.Status{}}}, Errors: []int{unauth, missing, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).putNetwork), Route: openapi.Route{Method: "PUT", Path: "/v1/sandboxes/{id}/network", ID: "setNetwork", Tags: []string{sb}, Summary: "Replace a proxy sandbox's own allow and deny lists.",
			Description: "New connections follow the new policy at once; open connections it refuses are cut. A sandbox's lists can narrow its tenant's policy, never widen it: rules an outer level refuses are listed in not_effective.",
			Body:        gateway.Policy{}, Responses: []openapi.Response{{Status: 200, Body: gateway.Status{}}}, Errors: []int{bad, unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).listEgress), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/egress", ID: "listEgress", Tags: []string{sb}, Summary: "A proxy sandbox's recent egress decisions, newest first.",
			Query:     []openapi.Param{{Name: "limit", Description: "How many (1 to 1000, default 100)."}},
			Responses: []openapi.Response{{Status: 200, Body: []gateway.Record{}}}, Errors: []int{bad, unauth, missing, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).listProcesses), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/processes", ID: "listProcesses", Tags: []string{procs}, Summary: "The sandbox's long-lived processes, running and recently ended.",
			Responses: []openapi.Response{{Status: 200, Body: []Process{}}}, Errors: []int{unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).startProcess), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/processes", ID: "startProcess", Tags: []string{procs}, Summary: "Start a process the sandbox keeps running (a server, a watcher, a terminal with pty).",
			Description: "The process belongs to the sandbox: it outlives the request, the run, a dropped pipe and a sandboxd restart, and ends with the sandbox. 429 past the configured number of running processes.",
			Body:        StartProcess{}, Responses: []openapi.Response{{Status: 201, Body: Process{}}}, Errors: []int{bad, unauth, missing, precond, exhausted, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).getProcess), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/processes/{pid}", ID: "getProcess", Tags: []string{procs}, Summary: "A process: its state, exit code or signal, times.",
			Responses: []openapi.Response{{Status: 200, Body: Process{}}}, Errors: []int{unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).deleteProcess), Route: openapi.Route{Method: "DELETE", Path: "/v1/sandboxes/{id}/processes/{pid}", ID: "killProcess", Tags: []string{procs}, Summary: "Kill a process and every process it started.",
			Responses: []openapi.Response{{Status: 204, Description: "Killed."}}, Errors: []int{unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).processOutput), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/processes/{pid}/output", ID: "processOutput", Tags: []string{procs}, Summary: "What a process printed since a byte offset.",
			Description: "With Accept: text/event-stream the answer is a stream: output events as the process prints, a dropped event when the output buffer lost bytes, and one exit event. Reconnecting with since = an event's offset plus its text's length in bytes gives no gap and no repeat.",
			Headers:     []openapi.Param{accept}, Query: []openapi.Param{{Name: "since", Description: "The byte offset to read from (a next cursor, or 0)."}},
			Responses: []openapi.Response{{Status: 200, Body: ProcessOutput{},
				StreamDesc: "Server-Sent Events: output, dropped and exit, with `: heartbeat` comments.",
				Events: []openapi.Event{
					{Name: EventProcessOutput, Data: OutputChunk{}, Description: "Text the process printed, at its byte offset."},
					{Name: EventProcessDropped, Data: map[string]int64{}, Description: "Bytes lost before the next output (the buffer keeps the newest)."},
					{Name: EventProcessExit, Data: ProcessExit{}, Description: "How the process ended; the last event."},
					{Name: EventError, Data: StreamError{}, Description: "The follow ended early; reconnect with the last cursor."},
				}}},
			Errors: []int{bad, unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).processInput), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/processes/{pid}/input", ID: "processInput", Tags: []string{procs}, Summary: "Write to a process's stdin (keys, with a terminal).",
			Body: ProcessInput{}, Responses: []openapi.Response{{Status: 204, Description: "Written."}}, Errors: []int{bad, unauth, missing, precond, unavail, timeout}}},
		{scope: ScopeSandbox, serve: authed((*Server).signalProcess), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/processes/{pid}/signal", ID: "signalProcess", Tags: []string{procs}, Summary: "Send a signal to a process's group.",
			Body: ProcessSignal{}, Responses: []openapi.Response{{Status: 204, Description: "Sent."}}, Errors: []int{bad, unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).resizeProcess), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/processes/{pid}/resize", ID: "resizeProcess", Tags: []string{procs}, Summary: "Resize a process's terminal.",
			Body: TermSize{}, Responses: []openapi.Response{{Status: 204, Description: "Resized."}}, Errors: []int{bad, unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).listPorts), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/ports", ID: "listPorts", Tags: []string{sb}, Summary: "The TCP ports listening inside a sandbox, with the process holding each where known.",
			Responses: []openapi.Response{{Status: 200, Body: []proto.ListeningPort{}}}, Errors: []int{unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).createPreview), Route: openapi.Route{Method: "POST", Path: "/v1/sandboxes/{id}/previews", ID: "createPreview", Tags: []string{sb}, Summary: "Make a link that shows a port of the sandbox to a browser without the token.",
			Description: "The link is bound to this sandbox and port, signed by sandboxd, and lives ttl_s seconds (default preview.default_ttl, 1 h; at most preview.max_ttl). Without preview.domain it is path-based (/p/{token}/ on sandboxd's address: the app's relative URLs work, absolute ones leave the preview); with it, host-based ({port}-{preview}.{domain}, the app at /; the first visit sets a cookie of that host). An expired or revoked link is answered 403.",
			Body:        CreatePreviewRequest{}, Responses: []openapi.Response{{Status: 201, Body: ports.Preview{}}}, Errors: []int{bad, unauth, missing, exhausted, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).listPreviews), Route: openapi.Route{Method: "GET", Path: "/v1/sandboxes/{id}/previews", ID: "listPreviews", Tags: []string{sb}, Summary: "The sandbox's live preview links (not expired, not revoked), oldest first.",
			Responses: []openapi.Response{{Status: 200, Body: []ports.Preview{}}}, Errors: []int{unauth, missing, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).deletePreview), Route: openapi.Route{Method: "DELETE", Path: "/v1/sandboxes/{id}/previews/{preview}", ID: "deletePreview", Tags: []string{sb}, Summary: "Revoke a preview link at once: its next request is refused and its open connections are cut.",
			Responses: []openapi.Response{{Status: 204, Description: "Revoked."}}, Errors: []int{unauth, missing, unavail}}},
		// The port proxy, under each method a browser or an HTTP client
		// sends (GET takes HEAD too).
		portProxyRoute("GET", "proxyPortGet"), portProxyRoute("POST", "proxyPortPost"), portProxyRoute("PUT", "proxyPortPut"),
		portProxyRoute("PATCH", "proxyPortPatch"), portProxyRoute("DELETE", "proxyPortDelete"), portProxyRoute("OPTIONS", "proxyPortOptions"),
		{scope: ScopeNone, serve: authed((*Server).whoami), Route: openapi.Route{Method: "GET", Path: "/v1/whoami", ID: "whoami", Tags: []string{ops}, Summary: "The tenant the token belongs to.",
			Responses: []openapi.Response{{Status: 200, Body: WhoAmI{}}}, Errors: []int{unauth}}},
		// The audit record is a chain per replica: with replication the
		// router asks every replica and merges their pages.
		{scope: ScopeReplicas, serve: authed((*Server).getAudit), Route: openapi.Route{Method: "GET", Path: "/v1/audit", ID: "listAudit", Tags: []string{ops}, Summary: "The tenant's audit records, oldest first; with replicas, every replica's.",
			Description: "One record per API request, per tool call and per lifecycle event, each with the SHA-256 of the record before it in its replica's chain (sandboxd audit verify DIR checks it). The admin token (no tenants configured) sees every tenant's. With replicas the answer merges every live replica's records by time, each replica's in its own order; a replica that does not answer within 2 s is named in unreached, and the cursor goes on from where each replica's part ended.",
			Query: []openapi.Param{{Name: "since", Description: "Only records of actions that started at or after this time (RFC 3339)."},
				{Name: "until", Description: "Only records of actions that started before this time (RFC 3339)."},
				{Name: "run", Description: "Only this run's records."}, {Name: "sandbox", Description: "Only this sandbox's records."},
				{Name: "limit", Description: "How many (1 to 1000, default 100)."},
				{Name: "cursor", Description: "The next value of the page before."}},
			Responses: []openapi.Response{{Status: 200, Body: AuditPage{}}}, Errors: []int{bad, unauth, unavail}}},
		{scope: ScopeNone, serve: authed((*Server).listSnapshots), Route: openapi.Route{Method: "GET", Path: "/v1/snapshots", ID: "listSnapshots", Tags: []string{sb}, Summary: "The tenant's snapshots, newest first.",
			Responses: []openapi.Response{{Status: 200, Body: []Snapshot{}}}, Errors: []int{unauth, precond, unavail}}},
		{scope: ScopeNone, serve: authed((*Server).getSnapshot), Route: openapi.Route{Method: "GET", Path: "/v1/snapshots/{id}", ID: "getSnapshot", Tags: []string{sb}, Summary: "A snapshot.",
			Responses: []openapi.Response{{Status: 200, Body: Snapshot{}}}, Errors: []int{unauth, missing, precond, unavail}}},
		{scope: ScopeNone, serve: authed((*Server).deleteSnapshot), Route: openapi.Route{Method: "DELETE", Path: "/v1/snapshots/{id}", ID: "deleteSnapshot", Tags: []string{sb}, Summary: "Delete a snapshot; sandboxes made from it keep their files.",
			Responses: []openapi.Response{{Status: 204}}, Errors: []int{unauth, missing, precond, unavail}}},
		{scope: ScopeSandbox, serve: authed((*Server).deleteSandbox), Route: openapi.Route{Method: "DELETE", Path: "/v1/sandboxes/{id}", ID: "deleteSandbox", Tags: []string{sb}, Summary: "Stop everything in a sandbox and remove it.",
			Responses: []openapi.Response{{Status: 204, Description: "Removed."}}, Errors: []int{unauth, missing, unavail}}},

		{scope: ScopeBody, serve: authed((*Server).createRun), Route: openapi.Route{Method: "POST", Path: "/v1/runs", ID: "createRun", Tags: []string{runs}, Summary: "Start an agent run in a conversation.",
			Body: CreateRunRequest{}, Responses: []openapi.Response{{Status: 201, Body: Run{}}},
			Errors: []int{bad, unauth, missing, exhausted, unavail}}},
		{scope: ScopeNone, serve: authed((*Server).listRuns), Route: openapi.Route{Method: "GET", Path: "/v1/runs", ID: "listRuns", Tags: []string{runs}, Summary: "List the tenant's live runs.",
			Responses: []openapi.Response{{Status: 200, Body: []RunSummary{}}}, Errors: []int{unauth}}},
		{scope: ScopeRun, serve: runAuthed((*Server).getRun), Route: openapi.Route{Method: "GET", Path: "/v1/runs/{id}", ID: "getRun", Tags: []string{runs}, Summary: "Get a run with its current tool list.",
			Responses: []openapi.Response{{Status: 200, Body: Run{}}}, Errors: []int{unauth, missing, unavail}}},
		{scope: ScopeRun, serve: runAuthed((*Server).listTools), Route: openapi.Route{Method: "GET", Path: "/v1/runs/{id}/tools", ID: "listTools", Tags: []string{runs}, Summary: "The tools the run sees, ready to hand to a model.",
			Responses: []openapi.Response{{Status: 200, Body: []ToolSpec{}}}, Errors: []int{unauth, missing, unavail}}},
		{scope: ScopeRun, serve: runAuthed((*Server).callTool), Route: openapi.Route{Method: "POST", Path: "/v1/runs/{id}/tools/{name}", ID: "callTool", Tags: []string{runs}, Summary: "Call a tool.",
			Description: "What the model should read (bad arguments, a refused approval) is a 200 with is_error. With Accept: text/event-stream the answer is a stream of output events and one result (or error) event; what fails before the stream began keeps its status and JSON error body.",
			Headers:     []openapi.Param{accept}, BodySchema: toolArgs, BodyOptional: true,
			Responses: []openapi.Response{{Status: 200, Body: ToolResult{},
				StreamDesc: "Server-Sent Events: output while the tool runs, `: heartbeat` comments while it is silent, then exactly one result or error event.",
				Events: []openapi.Event{
					{Name: EventOutput, Data: OutputEvent{}, Description: "Text the tool printed."},
					{Name: EventResult, Data: ToolResult{}, Description: "The result, byte for byte a plain call's answer; the last event."},
					{Name: EventError, Data: StreamError{}, Description: "An error after the stream began, with the status a plain call would have had; the last event."},
				}}},
			Errors: []int{bad, unauth, missing, precond, unavail, timeout}}},
		{scope: ScopeRun, serve: runAuthed((*Server).listCalls), Route: openapi.Route{Method: "GET", Path: "/v1/runs/{id}/calls", ID: "listCalls", Tags: []string{runs}, Summary: "The run's recent tool calls, oldest first (the console's live view).",
			Description: "With Accept: text/event-stream the answer is a stream: the recent calls, then each call as it finishes, one call event each. A reader more than 64 calls behind loses its stream; it reconnects and skips what it has by seq.",
			Headers:     []openapi.Param{accept},
			Responses: []openapi.Response{{Status: 200, Body: []callrec.Call{},
				StreamDesc: "Server-Sent Events: call, with `: heartbeat` comments.",
				Events:     []openapi.Event{{Name: "call", Data: callrec.Call{}, Description: "A finished call."}}}},
			Errors: []int{unauth, missing, unavail}}},
		{scope: ScopeRun, serve: authed((*Server).deleteRun), Route: openapi.Route{Method: "DELETE", Path: "/v1/runs/{id}", ID: "deleteRun", Tags: []string{runs}, Summary: "End a run, its children and its workers.",
			Responses: []openapi.Response{{Status: 204, Description: "Ended."}}, Errors: []int{unauth, missing, unavail}}},
		// A run's MCP sessions and its call log live on the replica that
		// owns its conversation, as its calls do.
		{scope: ScopeRun, serve: runAuthed((*Server).serveMCP), Route: openapi.Route{Method: "POST", Path: "/v1/runs/{id}/mcp", ID: "mcpPost", Tags: []string{mcpTag}, Summary: "The run's tools over MCP (streamable HTTP).",
			Description: "A JSON-RPC message (or, in a 2025-03-26 session, a batch) of the Model Context Protocol: initialize, ping, tools/list, tools/call and notifications. The answer is JSON-RPC as JSON, or as a text/event-stream of message events when the client accepts only that. initialize issues the Mcp-Session-Id header every later request carries. What the transport refuses is answered with a JSON-RPC error object; what the API refuses first (the token, the run) with the error body.",
			Headers: []openapi.Param{accept, {Name: mcp.HeaderSession, Description: "The session initialize issued."},
				{Name: mcp.HeaderProtocol, Description: "The protocol revision the session negotiated."}},
			BodySchema: &openapi.Schema{Type: []string{"object", "array"}, Description: "JSON-RPC 2.0."},
			Responses: append([]openapi.Response{{Status: 200, Schema: &openapi.Schema{Type: []string{"object", "array"}, Description: "JSON-RPC 2.0."},
				Events: []openapi.Event{{Name: "message", Data: json.RawMessage(nil), Description: "A JSON-RPC message."}}},
				{Status: 202, Description: "A notification or response, accepted."}},
				mcpErrors(400, 403, 404, 406, 415, 429)...),
			Errors: []int{unauth}}},
		// GET is routed so the handler responds to it as the transport says
		// (405: no server-initiated stream), not as an unknown route.
		{scope: ScopeRun, serve: runAuthed((*Server).serveMCP), Route: openapi.Route{Method: "GET", Path: "/v1/runs/{id}/mcp", ID: "mcpGet", Tags: []string{mcpTag}, Summary: "No server-initiated stream: always 405, as the transport allows.",
			Responses: mcpErrors(404, 405), Errors: []int{unauth}}},
		{scope: ScopeRun, serve: runAuthed((*Server).serveMCP), Route: openapi.Route{Method: "DELETE", Path: "/v1/runs/{id}/mcp", ID: "mcpDelete", Tags: []string{mcpTag}, Summary: "End an MCP session.",
			Headers:   []openapi.Param{{Name: mcp.HeaderSession, Description: "The session to end.", Required: true}},
			Responses: append([]openapi.Response{{Status: 204, Description: "Ended."}}, mcpErrors(400, 404)...),
			Errors:    []int{unauth}}},

		{scope: ScopeSpace, serve: authed((*Server).listQuestions), Route: openapi.Route{Method: "GET", Path: "/v1/spaces/{space}/questions", ID: "listQuestions", Tags: []string{qs}, Summary: "The space's pending questions.",
			Description: "With Accept: text/event-stream the answer is a stream: the pending questions as question events, then question and resolved events as they happen. While a stream is open, a human is connected to the space.",
			Headers:     []openapi.Param{accept},
			Responses: []openapi.Response{{Status: 200, Body: []Question{},
				StreamDesc: "Server-Sent Events: question and resolved, with `: heartbeat` comments.",
				Events: []openapi.Event{
					{Name: "question", Data: Question{}, Description: "A question put to the space."},
					{Name: "resolved", Data: Resolution{}, Description: "A question that ended."},
				}}},
			Errors: []int{bad, unauth, unavail}}},
		{scope: ScopeQuestion, serve: authed((*Server).answerQuestion), Route: openapi.Route{Method: "POST", Path: "/v1/questions/{id}/answer", ID: "answerQuestion", Tags: []string{qs}, Summary: "Answer or skip a question.",
			Body: Answer{}, Responses: []openapi.Response{{Status: 200, Body: AnswerResult{}}},
			Errors: []int{bad, unauth, missing, conflict, unavail}}},

		{scope: ScopeNone, serve: (*Server).openAPIDoc, Route: openapi.Route{Method: "GET", Path: openAPIPath, ID: "openAPI", Tags: []string{ops}, Public: true, Summary: "This document.",
			Responses: []openapi.Response{{Status: 200, Schema: &openapi.Schema{Type: "object", Description: "An OpenAPI 3.1 document."}}}}},
		{scope: ScopeNone, serve: public((*Server).healthz), Route: openapi.Route{Method: "GET", Path: "/healthz", ID: "healthz", Tags: []string{ops}, Public: true, Summary: "Liveness.",
			Responses: []openapi.Response{{Status: 200, Body: Status{}}}}},
		{scope: ScopeNone, serve: public((*Server).readyz), Route: openapi.Route{Method: "GET", Path: "/readyz", ID: "readyz", Tags: []string{ops}, Public: true, Summary: "Readiness: 503 while the sandbox engine does not answer.",
			Responses: []openapi.Response{{Status: 200, Body: ReadyStatus{}}}, Errors: []int{unavail}}},
		{scope: ScopeNone, serve: (*Server).metricsHandler, Route: openapi.Route{Method: "GET", Path: "/metrics", ID: "metrics", Tags: []string{ops}, Public: true, Summary: "Prometheus metrics.",
			Responses: []openapi.Response{{Status: 200, ContentType: "text/plain", Schema: &openapi.Schema{Type: "string"}}}}},

		// The console and its redirects, outside the contract. A person who
		// opens the daemon's address in a browser gets the console; only
		// exactly "/" redirects (302, so the root stays free for later use),
		// every other unknown path keeps the JSON 404.
		{scope: ScopeNone, noDoc: true, serve: func(*Server) http.Handler { return uiHandler() }, Route: openapi.Route{Method: "GET", Path: "/ui/", ID: "console"}},
		{scope: ScopeNone, noDoc: true, serve: redirect("/ui/", http.StatusMovedPermanently), Route: openapi.Route{Method: "GET", Path: "/ui", ID: "consoleRedirect"}},
		{scope: ScopeNone, noDoc: true, serve: redirect("/ui/favicon.svg", http.StatusMovedPermanently), Route: openapi.Route{Method: "GET", Path: "/favicon.ico", ID: "favicon"}},
		{scope: ScopeNone, noDoc: true, serve: redirect("/ui/", http.StatusFound), Route: openapi.Route{Method: "GET", Path: "/{$}", ID: "root"}},
		// Path-based previews: the link's token is the permission, for one
		// port of one sandbox (previews.go).
		{scope: ScopePreview, noDoc: true, serve: public((*Server).servePathPreview), Route: openapi.Route{Path: ports.PathPrefix + "{token}/{path...}", ID: "preview"}},
		// The E2B API (package e2b), which authenticates on its own. A
		// call on one sandbox (its id in the path) and a request into one
		// (its id in the header) go to the replica owning the sandbox's
		// conversation; a create makes a fresh conversation, owned by the
		// replica that makes it, and a listing reads the engine, so those
		// are served where they arrive.
		{scope: ScopeNone, noDoc: true, serve: (*Server).mounted, Route: openapi.Route{Path: MountPrefix, ID: "e2b"}},
		{scope: ScopeSandbox, noDoc: true, serve: (*Server).mounted, Route: openapi.Route{Path: MountPrefix + "sandboxes/{id}", ID: "e2bSandbox"}},
		{scope: ScopeSandbox, noDoc: true, serve: (*Server).mounted, Route: openapi.Route{Path: MountPrefix + "sandboxes/{id}/{rest...}", ID: "e2bSandboxCall"}},
		{scope: ScopeSandbox, noDoc: true, serve: (*Server).mounted, Route: openapi.Route{Path: MountPrefix + "v2/sandboxes/{id}/{rest...}", ID: "e2bSandboxCallV2"}},
		{scope: ScopeSandboxHeader, noDoc: true, serve: (*Server).mounted, Route: openapi.Route{Path: MountSandboxPrefix, ID: "e2bInSandboxRoot"}},
		{scope: ScopeSandboxHeader, noDoc: true, serve: (*Server).mounted, Route: openapi.Route{Path: MountSandboxPrefix + "/", ID: "e2bInSandbox"}},
		{scope: ScopeNone, noDoc: true, serve: public((*Server).notFound), Route: openapi.Route{Path: "/", ID: "notFound"}},
	}
}

// portProxyPath is the port proxy's pattern path.
const portProxyPath = "/v1/sandboxes/{id}/ports/{port}/{path...}"

// portProxyRoute is the port proxy's entry for one method.
func portProxyRoute(method, id string) route {
	return route{scope: ScopeSandbox, serve: authed((*Server).proxyPort), Route: openapi.Route{Method: method, Path: portProxyPath, ID: id, Tags: []string{"sandboxes"},
		Summary:     "Pass a request to 127.0.0.1:{port} inside the sandbox, as /{path} with the query.",
		Description: "Through the agent's pipe, no port is opened on the sandbox. Bodies stream both ways, server-sent events arrive as sent, and a WebSocket (or other Upgrade) is spliced once the app agrees. The Authorization header is not passed on; the app sees Host localhost:{port} and the original in X-Forwarded-Host. An absolute redirect of the app is kept under this prefix. Errors before the app answers use the error body: 502 when nothing listens on the port.",
		Responses:   []openapi.Response{{Status: 200, Description: "The app's own response: any status, headers and body.", ContentType: "*/*", Schema: &openapi.Schema{Type: "string"}}},
		Errors:      []int{400, 401, 404, 412, 502, 503, 504}}}
}
