// Package audit keeps sandboxd's audit record (DESIGN.md §8, The audit
// record): one JSON line per API request and per tool call, appended to
// files under DATA_DIR/audit, each line carrying the SHA-256 of the line
// before it, so that a line changed, removed or moved is found by Verify
// (`sandboxd audit verify DIR`). A replica writes its own chain in its own
// data dir.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Kinds of record.
const (
	// KindAPI is one HTTP request to the API; Action is its route pattern.
	KindAPI = "api"
	// KindTool is one tool call; Action is the tool's name, Route the
	// request it came in on.
	KindTool = "tool"
	// KindEvent is one lifecycle event (package events): a sandbox's
	// state changed, a run made or ended, a question asked or answered, a
	// preview link made or revoked, an egress decision; Action is its
	// type.
	KindEvent = "event"
)

// Record is one line of the audit record. The field order is the line's
// order (encoding/json keeps it), and a line is never rewritten: Prev is the
// SHA-256 of the previous line's exact bytes (without its newline).
type Record struct {
	Seq  uint64    `json:"seq"`  // per chain, from 1, one more per record
	Prev string    `json:"prev"` // hex SHA-256 of the previous line; "" for the first record of a chain
	Time time.Time `json:"time"` // when the action started, UTC

	Replica   string `json:"replica"` // the process's host name (on Kubernetes, the pod)
	Kind      string `json:"kind"`    // KindAPI or KindTool
	Tenant    string `json:"tenant,omitempty"`
	TokenID   string `json:"token_id,omitempty"` // TokenID of the bearer token; never the token
	RequestID string `json:"request_id,omitempty"`

	Run          string `json:"run,omitempty"`
	Conversation string `json:"conversation,omitempty"`
	Sandbox      string `json:"sandbox,omitempty"`

	Action string `json:"action"`          // the route pattern ("POST /v1/sandboxes") or the tool's name
	Route  string `json:"route,omitempty"` // a tool record's request route
	Level  string `json:"level,omitempty"` // a tool's level: read, write or exec

	// ArgsSHA256 and ArgsBytes describe the arguments without keeping
	// them: a tool call's arguments as its schema normalised them, a
	// request's body as the handler read it.
	ArgsSHA256 string `json:"args_sha256,omitempty"`
	ArgsBytes  int64  `json:"args_bytes"`

	Status     int     `json:"status,omitempty"` // an API record's HTTP status
	Outcome    string  `json:"outcome"`          // "ok", an error class (errdefs.Code) or a tool outcome
	DurationMS float64 `json:"duration_ms"`
	// Approval is the answer to the permission question a write or exec
	// call asked (tools.Approval*); "" when none was asked.
	Approval string `json:"approval,omitempty"`
	// Detail says what an event record is about: the question, the
	// preview and its port, the egress target and the decision's reason.
	Detail string `json:"detail,omitempty"`
}

// TokenID is the short id of a bearer token in the record: the first 16 hex
// digits of its SHA-256 (the start of a tenant's token_sha256 in the
// config), never the token.
func TokenID(token string) string {
	if token == "" {
		return ""
	}
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:8])
}

// Digest is the hex SHA-256 of b.
func Digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// MS is d in milliseconds, to the microsecond.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
