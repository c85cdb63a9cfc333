package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sandboxd/sandboxd/egress/gateway"
)

// Network returns a sandbox's network mode and, for "proxy", its
// effective egress policy (GET /v1/sandboxes/{id}/network).
func (c *Client) Network(ctx context.Context, id string) (gateway.Status, error) {
	var out gateway.Status
	err := c.do(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/network", nil, http.StatusOK, &out)
	return out, err
}

// SetNetwork replaces a proxy sandbox's own allow and deny lists (PUT
// /v1/sandboxes/{id}/network); open connections the new policy refuses
// are cut.
func (c *Client) SetNetwork(ctx context.Context, id string, p gateway.Policy) (gateway.Status, error) {
	var out gateway.Status
	err := c.do(ctx, http.MethodPut, "/v1/sandboxes/"+url.PathEscape(id)+"/network", p, http.StatusOK, &out)
	return out, err
}

// Egress lists a proxy sandbox's recent egress decisions, newest first
// (GET /v1/sandboxes/{id}/egress); limit 0 asks for the default.
func (c *Client) Egress(ctx context.Context, id string, limit int) ([]gateway.Record, error) {
	path := "/v1/sandboxes/" + url.PathEscape(id) + "/egress"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var out []gateway.Record
	err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK, &out)
	return out, err
}
