package eval

import (
	"context"
	"encoding/json"

	"github.com/sandboxd/sandboxd/tools"
)

// bridge returns the function that serves a cell's tool() calls: each runs
// through the registry with the calling run's Env, so the run's surface,
// approvals and the write wrappers apply exactly as to a call the model made.
// The bridge is called with the eval call's own context, which holds the
// conversation's turn, so a nested non-parallel-safe tool runs inside that
// turn instead of queueing behind the cell that waits for it.
func (t *Tool) bridge(env *tools.Env) bridgeFunc {
	return func(ctx context.Context, name string, args json.RawMessage) message {
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		res, err := t.reg.Call(ctx, env, name, args)
		if err != nil {
			return message{IsError: true, Content: []toolBlock{{Type: "text", Text: err.Error()}}}
		}
		m := message{IsError: res.IsError}
		for _, b := range res.Content {
			m.Content = append(m.Content, toolBlock{Type: b.Type, Text: b.Text, MimeType: b.MimeType, Data: b.Data})
		}
		if m.Content == nil {
			m.Content = []toolBlock{}
		}
		return m
	}
}
