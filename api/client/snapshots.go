package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sandboxd/sandboxd/api"
)

// CreateSnapshot takes a snapshot of a sandbox's files.
func (c *Client) CreateSnapshot(ctx context.Context, sandboxID, name string) (api.Snapshot, error) {
	var out api.Snapshot
	err := c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/snapshots", api.CreateSnapshotRequest{Name: name}, http.StatusCreated, &out)
	return out, err
}

// ListSnapshots lists the tenant's snapshots, newest first.
func (c *Client) ListSnapshots(ctx context.Context) ([]api.Snapshot, error) {
	var out []api.Snapshot
	err := c.do(ctx, http.MethodGet, "/v1/snapshots", nil, http.StatusOK, &out)
	return out, err
}

// GetSnapshot reads one snapshot.
func (c *Client) GetSnapshot(ctx context.Context, id string) (api.Snapshot, error) {
	var out api.Snapshot
	err := c.do(ctx, http.MethodGet, "/v1/snapshots/"+url.PathEscape(id), nil, http.StatusOK, &out)
	return out, err
}

// DeleteSnapshot removes a snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/snapshots/"+url.PathEscape(id), nil, http.StatusNoContent, nil)
}

// ForkSandbox makes one sandbox per conversation from one consistent point
// of a sandbox.
func (c *Client) ForkSandbox(ctx context.Context, sandboxID string, conversations []string) (api.ForkResponse, error) {
	var out api.ForkResponse
	err := c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/fork", api.ForkRequest{Conversations: conversations}, http.StatusCreated, &out)
	return out, err
}
