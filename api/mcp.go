package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/sandboxd/sandboxd/api/mcp"
	"github.com/sandboxd/sandboxd/tools"
)

// mcpRuns is what the MCP endpoint sees of the API: the same run lookup,
// tool list and call path as /v1/runs/{id}/tools.
type mcpRuns struct{ s *Server }

var _ mcp.Runs = mcpRuns{}

func (m mcpRuns) Live(ctx context.Context, tenant, run string) error {
	_, err := m.s.runs.Get(ctx, tenant, run)
	return err
}

func (m mcpRuns) Tools(ctx context.Context, tenant, run string) ([]tools.Spec, error) {
	return m.s.runTools(ctx, tenant, run)
}

func (m mcpRuns) Call(ctx context.Context, tenant, run, name string, args json.RawMessage) (tools.Result, error) {
	return m.s.runCall(ctx, tenant, run, name, args)
}

// newMCP is the endpoint /v1/runs/{id}/mcp, its bodies capped as tool
// calls are.
func (s *Server) newMCP() *mcp.Handler {
	return mcp.NewHandler(mcpRuns{s},
		mcp.WithLogger(s.log),
		mcp.WithHeartbeat(s.streamHeartbeat),
		mcp.WithBodyReader(func(w http.ResponseWriter, r *http.Request) ([]byte, error) { return readBody(w, r, s.maxTool) }))
}

// serveMCP serves /v1/runs/{id}/mcp for an authenticated tenant (or the
// run's own token).
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, tenant string) error {
	s.mcp.ServeRun(w, r, tenant, r.PathValue("id"))
	return nil
}

// EndMCPSessions ends the MCP sessions of a run that ended: wire it into
// the run store's end hook, so a run that expires or ends with its parent
// drops them at once (DELETE /v1/runs/{id} does it itself; until then a
// session of an ended run gets 404 on its next use and is dropped).
func (s *Server) EndMCPSessions(run string) {
	if s.mcp != nil {
		s.mcp.DropRun(run)
	}
}
