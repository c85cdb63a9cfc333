package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
)

// callTool calls a tool and turns an is_error result into an error, so a
// benchmark never times a call that did not do its job.
func callTool(ctx context.Context, c *client.Client, runID, tool string, args any) (string, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	res, err := c.CallTool(ctx, runID, tool, raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	text := res.Text()
	if res.IsError {
		return "", fmt.Errorf("%s answered an error: %s", tool, text)
	}
	return text, nil
}

// writeAndCheck writes content through the write tool and reads it back
// through the read tool, checking every line.
func writeAndCheck(ctx context.Context, c *client.Client, runID, path string, content []byte) error {
	if _, err := callTool(ctx, c, runID, "write", map[string]string{"path": path, "content": string(content)}); err != nil {
		return err
	}
	text, err := callTool(ctx, c, runID, "read", map[string]string{"path": path})
	if err != nil {
		return err
	}
	if err := bench.CheckNumbered(text, bench.Lines(content)); err != nil {
		return fmt.Errorf("read of %s after write: %w", path, err)
	}
	return nil
}
