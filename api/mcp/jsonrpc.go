package mcp

import (
	"bytes"
	"encoding/json"
)

// JSON-RPC 2.0 error codes MCP uses.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// message is one JSON-RPC message as received: a request (method and id),
// a notification (method, no id) or a response (result or error, no
// method). ID is nil when the member is absent and "null" when it is null.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (m *message) isRequest() bool { return m.Method != "" && m.ID != nil }

// response is one JSON-RPC response we send.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

var nullID = json.RawMessage("null")

func resultOf(id json.RawMessage, v any) *response {
	return &response{JSONRPC: "2.0", ID: id, Result: v}
}

func errorOf(id json.RawMessage, code int, msg string) *response {
	if id == nil {
		id = nullID
	}
	return &response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}}
}

// validID reports whether id is a string or a number, the ids MCP allows
// (never null).
func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case c == '-' || c >= '0' && c <= '9':
		var n json.Number
		return json.Unmarshal(id, &n) == nil
	}
	return false
}

// decodeMessage parses one message that is already known to be valid JSON
// and checks its envelope. A broken envelope is returned as the error
// response to send (nil when the message is fine).
func decodeMessage(raw json.RawMessage) (*message, *response) {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errorOf(nil, CodeInvalidRequest, "the message is not a JSON-RPC object: "+err.Error()+"; send {\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"...\", \"params\": {...}}")
	}
	id := m.ID
	if id != nil && !validID(id) {
		return nil, errorOf(nil, CodeInvalidRequest, "the id must be a string or a number (MCP allows no null id)")
	}
	if m.JSONRPC != "2.0" {
		return nil, errorOf(id, CodeInvalidRequest, "the message must carry \"jsonrpc\": \"2.0\"")
	}
	if m.Method == "" && (m.Result == nil && m.Error == nil || id == nil) {
		return nil, errorOf(id, CodeInvalidRequest, "the message has no method: a request needs \"method\" and \"id\", a notification \"method\" alone")
	}
	return &m, nil
}
