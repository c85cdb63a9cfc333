package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// CallToolStream is CallTool with the call's output handed to out while the
// call runs (Accept: text/event-stream): each `output` event, in order, on
// the calling goroutine. It returns what CallTool returns, the result being
// the stream's `result` event. A tool that does not stream responds with no
// output events; a sandboxd that predates streaming responds with plain JSON,
// which is taken as the result.
func (c *Client) CallToolStream(ctx context.Context, runID, tool string, args json.RawMessage, out func(api.OutputEvent)) (api.ToolResult, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	path := "/v1/runs/" + url.PathEscape(runID) + "/tools/" + url.PathEscape(tool)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.String()+path, strings.NewReader(string(args)))
	if err != nil {
		return api.ToolResult{}, errdefs.InvalidArgument("request POST %s cannot be made: %v", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // the stream lives as long as the call (and ctx); heartbeats keep it
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return api.ToolResult{}, fmt.Errorf("POST %s: %w", path, ctx.Err())
		}
		return api.ToolResult{}, errdefs.Unavailable("sandboxd at %s does not answer: %v; check that it runs and the address is right", c.base, err)
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		// Responded before anything was streamed: exactly a plain call's response.
		data, err := readAnswer(resp)
		if err != nil {
			return api.ToolResult{}, errdefs.Unavailable("POST %s: the answer was cut off: %v", path, err)
		}
		if len(data) > maxAnswer {
			return api.ToolResult{}, errdefs.ResourceExhausted("POST %s: the answer is larger than %d bytes", path, maxAnswer)
		}
		if resp.StatusCode != http.StatusOK {
			return api.ToolResult{}, decodeError(resp.StatusCode, data)
		}
		var res api.ToolResult
		if err := json.Unmarshal(data, &res); err != nil {
			return api.ToolResult{}, errdefs.Internal("POST %s: the answer is not the expected JSON: %v", path, err)
		}
		return res, nil
	}
	return readToolStream(resp.Body, path, out)
}

// readToolStream reads events until the result (or error) event.
func readToolStream(body io.Reader, path string, out func(api.OutputEvent)) (api.ToolResult, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), maxAnswer)
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name == "" {
				continue
			}
			switch name {
			case api.EventOutput:
				var ev api.OutputEvent
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return api.ToolResult{}, errdefs.Internal("POST %s: an output event is not the expected JSON: %v", path, err)
				}
				if out != nil {
					out(ev)
				}
			case api.EventResult:
				var res api.ToolResult
				if err := json.Unmarshal([]byte(data), &res); err != nil {
					return api.ToolResult{}, errdefs.Internal("POST %s: the result event is not the expected JSON: %v", path, err)
				}
				return res, nil
			case api.EventError:
				var se api.StreamError
				if err := json.Unmarshal([]byte(data), &se); err != nil || se.Error.Code == "" {
					return api.ToolResult{}, errdefs.Internal("POST %s: the error event is not the expected JSON: %s", path, data)
				}
				return api.ToolResult{}, errdefs.FromCode(se.Error.Code, se.Error.Message)
			}
			name, data = "", ""
		case strings.HasPrefix(line, ":"): // heartbeat
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if err := sc.Err(); err != nil {
		return api.ToolResult{}, errdefs.Unavailable("POST %s: the stream broke before the result: %v; the call may have run, check its effects before retrying", path, err)
	}
	return api.ToolResult{}, errdefs.Unavailable("POST %s: the stream ended before the result; the call may have run, check its effects before retrying", path)
}
