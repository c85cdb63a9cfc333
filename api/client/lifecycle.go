package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sandboxd/sandboxd/api"
)

// PauseSandbox freezes every process of a sandbox; the next call, or
// ResumeSandbox, resumes it.
func (c *Client) PauseSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	return c.lifecycle(ctx, id, "pause")
}

// HibernateSandbox stops every process of a sandbox and frees its memory,
// keeping its files; the next call, or ResumeSandbox, starts it again.
func (c *Client) HibernateSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	return c.lifecycle(ctx, id, "hibernate")
}

// ResumeSandbox brings a paused or hibernated sandbox back to running.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	return c.lifecycle(ctx, id, "resume")
}

func (c *Client) lifecycle(ctx context.Context, id, verb string) (api.Sandbox, error) {
	var out api.Sandbox
	err := c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/"+verb, nil, http.StatusOK, &out)
	return out, err
}
