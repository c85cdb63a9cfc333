package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// toolInfo is a tool as tools/list shows it.
type toolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations *annotations    `json:"annotations,omitempty"`
}

// annotations are the hints a tool's level gives: a read-level tool has no
// side effects; a write or exec tool may change the workspace (MCP's
// default for destructiveHint, true, stands).
type annotations struct {
	ReadOnlyHint bool `json:"readOnlyHint"`
}

// Content blocks of a tools/call result: text, or an image as base64 data.
type textContent struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type imageContent struct {
	Type     string `json:"type"` // "image"
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

type callResult struct {
	Content []any `json:"content"` // textContent or imageContent
	IsError bool  `json:"isError"`
}

// served reports whether method is one this endpoint serves.
func served(method string) bool {
	switch method {
	case "initialize", "ping", "tools/list", "tools/call":
		return true
	}
	return false
}

// dispatch responds to one request of a session (s is nil only for a method
// that is not served).
func (h *Handler) dispatch(ctx context.Context, s *session, m *message) *response {
	if !served(m.Method) {
		return errorOf(m.ID, CodeMethodNotFound, "method "+quoteShort(m.Method)+" is not served here; this server offers initialize, ping, tools/list and tools/call")
	}
	switch m.Method {
	case "ping":
		return resultOf(m.ID, struct{}{})
	case "tools/list":
		return h.list(ctx, s, m)
	case "tools/call":
		return h.call(ctx, s, m)
	}
	return errorOf(m.ID, CodeInvalidRequest, "initialize must not be part of a batch; send it alone")
}

func (h *Handler) list(ctx context.Context, s *session, m *message) *response {
	specs, err := h.runs.Tools(ctx, s.tenant, s.run)
	if err != nil {
		if !errors.Is(err, errdefs.ErrNotFound) {
			h.log.ErrorContext(ctx, "MCP tools/list failed", "err", err)
		}
		return errorOf(m.ID, CodeInternalError, err.Error())
	}
	out := make([]toolInfo, 0, len(specs))
	for _, sp := range specs {
		out = append(out, toolInfo{
			Name:        sp.Name,
			Description: sp.Description,
			InputSchema: sp.InputSchema,
			Annotations: &annotations{ReadOnlyHint: sp.Level == tools.LevelRead},
		})
	}
	return resultOf(m.ID, map[string]any{"tools": out})
}

func (h *Handler) call(ctx context.Context, s *session, m *message) *response {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(m.Params) == 0 || json.Unmarshal(m.Params, &p) != nil || p.Name == "" {
		return errorOf(m.ID, CodeInvalidParams, "tools/call needs params {\"name\": \"<tool>\", \"arguments\": {...}}")
	}
	args := bytes.TrimSpace(p.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
		args = []byte("{}")
	case args[0] != '{':
		return errorOf(m.ID, CodeInvalidParams, "the arguments of "+quoteShort(p.Name)+" must be a JSON object")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer h.sessions.track(s, idKey(m.ID), cancel)()
	res, err := h.runs.Call(ctx, s.tenant, s.run, p.Name, args)
	if err != nil {
		return h.failure(ctx, m.ID, err)
	}
	return resultOf(m.ID, resultContent(res))
}

// failure turns an error of the API into the response: a tool the run does
// not see or arguments that are no object are the caller's mistake, a
// JSON-RPC error; anything else (the sandbox paused or gone, a wait for the
// conversation's earlier call cut short, sandboxd's own failure) is a tool
// error the model reads, as MCP asks for execution errors.
func (h *Handler) failure(ctx context.Context, id json.RawMessage, err error) *response {
	switch {
	case errors.Is(err, errdefs.ErrNotFound), errors.Is(err, errdefs.ErrInvalidArgument):
		return errorOf(id, CodeInvalidParams, err.Error())
	case errdefs.Code(err) == "internal":
		h.log.ErrorContext(ctx, "MCP call failed", "err", err)
	}
	return resultOf(id, callResult{Content: []any{textContent{Type: "text", Text: err.Error()}}, IsError: true})
}

// resultContent is a tool result as MCP content.
func resultContent(res tools.Result) callResult {
	out := callResult{Content: make([]any, 0, len(res.Content)), IsError: res.IsError}
	for _, b := range res.Content {
		switch b.Type {
		case "image":
			out.Content = append(out.Content, imageContent{Type: "image", Data: b.Data, MimeType: b.MimeType})
		default:
			out.Content = append(out.Content, textContent{Type: "text", Text: b.Text})
		}
	}
	return out
}
