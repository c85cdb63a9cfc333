// Package client is the Go client of sandboxd's HTTP API v1. Errors come
// back as errdefs classes, so callers use errors.Is(err, errdefs.ErrNotFound).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// maxAnswer caps what the client reads of one response; tool results with
// images are the largest legitimate ones.
const maxAnswer = 64 << 20

// Client calls one sandboxd. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient uses hc for requests (default: a client with a 5-minute
// timeout, since a tool call may run a long command).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client for the sandboxd at addr (e.g. http://127.0.0.1:7788)
// that sends token as its bearer token.
func New(addr, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(addr, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errdefs.InvalidArgument("sandboxd address %q is not a URL like http://127.0.0.1:7788", addr)
	}
	c := &Client{base: u, token: token, http: &http.Client{Timeout: 5 * time.Minute}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// CreateSandbox creates the conversation's sandbox.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	var out api.Sandbox
	err := c.do(ctx, http.MethodPost, "/v1/sandboxes", req, http.StatusCreated, &out)
	return out, err
}

// ListSandboxes lists the tenant's sandboxes, of one conversation when
// conversation is not "".
func (c *Client) ListSandboxes(ctx context.Context, conversation string) ([]api.Sandbox, error) {
	p := "/v1/sandboxes"
	if conversation != "" {
		p += "?conversation=" + url.QueryEscape(conversation)
	}
	var out []api.Sandbox
	err := c.do(ctx, http.MethodGet, p, nil, http.StatusOK, &out)
	return out, err
}

// GetSandbox returns one sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	var out api.Sandbox
	err := c.do(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id), nil, http.StatusOK, &out)
	return out, err
}

// DeleteSandbox removes a sandbox and everything in it.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sandboxes/"+url.PathEscape(id), nil, http.StatusNoContent, nil)
}

// CreateRun opens a run and returns it with its tool list.
func (c *Client) CreateRun(ctx context.Context, req api.CreateRunRequest) (api.Run, error) {
	var out api.Run
	err := c.do(ctx, http.MethodPost, "/v1/runs", req, http.StatusCreated, &out)
	return out, err
}

// GetRun returns the run with the tools it sees now and, in Unavailable,
// those it does not and why.
func (c *Client) GetRun(ctx context.Context, runID string) (api.Run, error) {
	var out api.Run
	err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID), nil, http.StatusOK, &out)
	return out, err
}

// Tools lists the tools the run may call.
func (c *Client) Tools(ctx context.Context, runID string) ([]api.ToolSpec, error) {
	var out []api.ToolSpec
	err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/tools", nil, http.StatusOK, &out)
	return out, err
}

// CallTool calls a tool with args (a JSON object; nil means none). A result
// with IsError is not a Go error: it is for the model to read.
func (c *Client) CallTool(ctx context.Context, runID, tool string, args json.RawMessage) (api.ToolResult, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var out api.ToolResult
	err := c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/tools/"+url.PathEscape(tool), args, http.StatusOK, &out)
	return out, err
}

// ListRuns lists the tenant's live runs, without their tool lists (GetRun
// has those).
func (c *Client) ListRuns(ctx context.Context) ([]api.RunSummary, error) {
	var out []api.RunSummary
	err := c.do(ctx, http.MethodGet, "/v1/runs", nil, http.StatusOK, &out)
	return out, err
}

// DeleteRun ends a run and its workers.
func (c *Client) DeleteRun(ctx context.Context, runID string) error {
	return c.do(ctx, http.MethodDelete, "/v1/runs/"+url.PathEscape(runID), nil, http.StatusNoContent, nil)
}

// Healthz reports whether sandboxd responds.
func (c *Client) Healthz(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, http.StatusOK, nil)
}

// Readyz reports whether sandboxd and its engine are ready.
func (c *Client) Readyz(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, http.StatusOK, nil)
}

// do sends body (JSON, or raw when it is a json.RawMessage) and decodes a
// `want` response into out; any other status becomes an errdefs error.
func (c *Client) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, ok := body.(json.RawMessage)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return errdefs.InvalidArgument("request to %s cannot be encoded: %v", path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return errdefs.InvalidArgument("request %s %s cannot be made: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return errdefs.Unavailable("sandboxd at %s does not answer: %v; check that it runs and the address is right", c.base, err)
	}
	defer resp.Body.Close()
	data, err := readAnswer(resp)
	if err != nil {
		return errdefs.Unavailable("%s %s: the answer was cut off: %v", method, path, err)
	}
	if len(data) > maxAnswer {
		return errdefs.ResourceExhausted("%s %s: the answer is larger than %d bytes", method, path, maxAnswer)
	}
	if resp.StatusCode != want {
		return decodeError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return errdefs.Internal("%s %s: the answer is not the expected JSON: %v", method, path, err)
	}
	return nil
}

// readAnswer reads at most maxAnswer+1 bytes of resp's body, in one
// allocation when the response says its length.
func readAnswer(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= maxAnswer {
		data := make([]byte, n)
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
}

// decodeError rebuilds the server's error class; a body that is not ours
// (a proxy's page, say) is classed by its status.
func decodeError(status int, data []byte) error {
	var eb api.ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error.Code != "" {
		return errdefs.FromCode(eb.Error.Code, eb.Error.Message)
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return errdefs.FromCode(codeOfStatus(status), fmt.Sprintf("sandboxd answered %d: %s", status, msg))
}

func codeOfStatus(status int) string {
	if c := errdefs.CodeOfStatus(status); c != "" {
		return c
	}
	return "internal"
}
