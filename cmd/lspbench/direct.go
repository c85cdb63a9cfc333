package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxd/sandboxd/tools/lsp/jsonrpc"
)

// direct is the peer: gopls in the same sandbox, started with `docker exec
// -i` and spoken to over that exec's stdio, with no sandboxd in between.
type direct struct {
	conn  *jsonrpc.Conn
	close func()
}

type quietHandler struct{}

func (quietHandler) Notify(string, json.RawMessage) {}
func (quietHandler) Request(_ context.Context, method string, params json.RawMessage) (any, error) {
	if method == "workspace/configuration" {
		var p struct{ Items []json.RawMessage }
		_ = json.Unmarshal(params, &p)
		return make([]any, len(p.Items)), nil
	}
	return nil, nil
}

// execPipe is the exec's stdin (write) and demultiplexed stdout (read).
type execPipe struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (p execPipe) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p execPipe) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p execPipe) Close() error                { p.w.Close(); return p.r.Close() }

func startDirect(ctx context.Context, ctr, root string) (*direct, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	ex, err := cli.ContainerExecCreate(ctx, ctr, container.ExecOptions{
		Cmd: []string{"gopls"}, WorkingDir: root, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: []string{"GOPROXY=off", "GOTOOLCHAIN=local", "GOTELEMETRY=off"},
	})
	if err != nil {
		cli.Close()
		return nil, err
	}
	hj, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		cli.Close()
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, os.Stderr, hj.Reader)
		pw.CloseWithError(err)
	}()
	conn := jsonrpc.New(execPipe{r: pr, w: hj.Conn}, quietHandler{})
	d := &direct{conn: conn, close: func() {
		_ = hj.CloseWrite()
		conn.Close()
		hj.Close()
		cli.Close()
	}}
	uri := "file://" + root
	var res json.RawMessage
	if err := conn.Call(ctx, "initialize", map[string]any{
		"processId": nil, "rootUri": uri, "workspaceFolders": []map[string]string{{"uri": uri, "name": "goproj"}},
		"capabilities": map[string]any{"textDocument": map[string]any{"definition": map[string]any{"linkSupport": true}}},
	}, &res); err != nil {
		d.close()
		return nil, fmt.Errorf("direct gopls initialize: %w", err)
	}
	if err := conn.Notify("initialized", map[string]any{}); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// open sends didOpen for a file with its text.
func (d *direct) open(file, text string) error {
	return d.conn.Notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
		"uri": "file://" + file, "languageId": "go", "version": 1, "text": text,
	}})
}

// definition asks for a definition and returns the raw response.
func (d *direct) definition(ctx context.Context, file string, line, char int) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return d.conn.CallRaw(ctx, "textDocument/definition", map[string]any{
		"textDocument": map[string]string{"uri": "file://" + file},
		"position":     map[string]int{"line": line, "character": char},
	})
}
