package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxd/sandboxd/api"
)

// mcpPNGCell displays a 2x1 PNG made with the standard library only, so it
// runs on any kernel (a real IPython or eval's stand-in).
const mcpPNGCell = `import struct, zlib
from IPython.display import Image, display
def _chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)
_png = (b'\x89PNG\r\n\x1a\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', 2, 1, 8, 2, 0, 0, 0))
        + _chunk(b'IDAT', zlib.compress(b'\x00\xff\x00\x00\x00\x00\xff')) + _chunk(b'IEND', b''))
display(Image(data=_png))
`

// mcpBackend is the backend the MCP tests use: Docker where the suite has
// it, else the host backend.
func mcpBackend() string {
	if os.Getenv("SANDBOXD_TEST_DOCKER") == "1" {
		return "docker"
	}
	return "host"
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func mcpConnect(ctx context.Context, endpoint, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "sandboxd-e2e-go", Version: "1.0.0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
}

// mcpRig is a daemon with a sandbox for conversation conv-mcp and a run in it.
type mcpRig struct {
	d   *daemon
	run api.Run
}

func (m mcpRig) endpoint(run string) string { return m.d.URL + "/v1/runs/" + run + "/mcp" }

func newMCPRig(t *testing.T) mcpRig {
	backend := mcpBackend()
	d := startDaemon(t, backend, t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), createReq(backend, "conv-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(context.Background(), sb.ID) })
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-mcp"})
	if err != nil {
		t.Fatal(err)
	}
	return mcpRig{d: d, run: run}
}

// jsonEqual compares two JSON values by content.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func checkPNG(t *testing.T, data []byte, mime string) {
	t.Helper()
	if mime != "image/png" {
		t.Fatalf("image mimeType %q, want image/png", mime)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the image block is not a PNG: %v", err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != 2 || h != 1 {
		t.Fatalf("the PNG is %dx%d, want the cell's 2x1", w, h)
	}
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCPGoSDK: the official Go SDK's client uses a run's MCP endpoint as
// its tool server: the listed tools are the run's, calls reach the sandbox,
// an eval image comes back as MCP image content, an approval-gated call
// with no human fails fast as a tool error, and a wrong token is refused.
func TestMCPGoSDK(t *testing.T) {
	m := newMCPRig(t)
	cctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs, err := mcpConnect(cctx, m.endpoint(m.run.ID), m.d.Token)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-06-18" {
		t.Errorf("negotiated %q, want 2025-06-18 (the newest sandboxd speaks)", v)
	}

	listed, err := cs.ListTools(cctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := m.d.Client.Tools(cctx, m.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.Tools) != len(specs) {
		t.Fatalf("MCP lists %d tools, the run %d", len(listed.Tools), len(specs))
	}
	for i, tool := range listed.Tools {
		sp := specs[i]
		if tool.Name != sp.Name || tool.Description != sp.Description || !jsonEqual(t, tool.InputSchema, sp.InputSchema) {
			t.Errorf("tool %d: MCP %q %v, run %q %s", i, tool.Name, tool.InputSchema, sp.Name, sp.InputSchema)
		}
		if ro := tool.Annotations != nil && tool.Annotations.ReadOnlyHint; ro != (sp.Level == "read") {
			t.Errorf("tool %s (%s) has readOnlyHint %v", sp.Name, sp.Level, ro)
		}
	}

	callOK := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			t.Fatalf("%s: isError: %s", name, textOf(res))
		}
		return res
	}
	callOK("write", map[string]any{"path": "mcp.txt", "content": "written over MCP\n"})
	if out := textOf(callOK("read", map[string]any{"path": "mcp.txt"})); !strings.Contains(out, "written over MCP") {
		t.Errorf("read = %q", out)
	}
	// The same file through the plain API: one workspace, one path.
	if out := mustCall(t, m.d, m.run.ID, "read", map[string]any{"path": "mcp.txt"}); !strings.Contains(out, "written over MCP") {
		t.Errorf("read over HTTP = %q", out)
	}
	if out := textOf(callOK("shell", map[string]any{"command": "echo from-$((6*7)) && cat mcp.txt"})); !strings.Contains(out, "from-42") || !strings.Contains(out, "written over MCP") {
		t.Errorf("shell = %q", out)
	}

	img := callOK("eval", map[string]any{"code": mcpPNGCell, "description": "a PNG over MCP"})
	var found bool
	for _, c := range img.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			checkPNG(t, ic.Data, ic.MIMEType)
			found = true
		}
	}
	if !found {
		t.Fatalf("eval of a PNG display gave no image content: %+v", img.Content)
	}

	// Bad arguments get the tool's result (the registry's schema), an
	// unknown tool a protocol error.
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"nope": 1}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "path") {
		t.Errorf("read without a path = %v, %+v", err, res)
	}
	if _, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "not available to this run") {
		t.Errorf("an unknown tool = %v, want a JSON-RPC error naming it", err)
	}

	t.Run("approval without a human fails fast", func(t *testing.T) {
		ask, err := m.d.Client.CreateRun(cctx, api.CreateRunRequest{Conversation: "conv-mcp", Space: "ops", Approval: "ask"})
		if err != nil {
			t.Fatal(err)
		}
		as, err := mcpConnect(cctx, m.endpoint(ask.ID), m.d.Token)
		if err != nil {
			t.Fatal(err)
		}
		defer as.Close()
		start := time.Now()
		res, err := as.CallTool(cctx, &mcp.CallToolParams{Name: "write", Arguments: map[string]any{"path": "gated.txt", "content": "x"}})
		if err != nil || !res.IsError || !strings.Contains(textOf(res), "no human is connected") {
			t.Fatalf("gated write = %v, %+v", err, res)
		}
		// "Fast": it did not wait for a question to expire (minutes).
		if d := time.Since(start); d > time.Minute {
			t.Errorf("the refusal took %s", d)
		}
		if _, err := call(t, m.d, m.run.ID, "read", map[string]any{"path": "gated.txt"}); err == nil {
			t.Error("the refused write happened anyway")
		}
	})

	t.Run("progress streams a call's output", func(t *testing.T) {
		type note struct {
			text string
			at   time.Time
		}
		notes := make(chan note, 16)
		c := mcp.NewClient(&mcp.Implementation{Name: "sandboxd-e2e-go", Version: "1.0.0"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				notes <- note{req.Params.Message, time.Now()}
			},
		})
		ps, err := c.Connect(cctx, &mcp.StreamableClientTransport{
			Endpoint: m.endpoint(m.run.ID), HTTPClient: &http.Client{Transport: bearer{m.d.Token, http.DefaultTransport}}, MaxRetries: -1,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ps.Close()
		params := &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": "echo first; sleep 3; echo second"}}
		params.SetProgressToken("shell-1")
		res, err := ps.CallTool(cctx, params)
		returned := time.Now()
		if err != nil || res.IsError {
			t.Fatalf("streamed shell: %v %+v", err, res)
		}
		// The client may hand notifications to the handler after the result:
		// collect until both lines are in, or a deadline.
		var got []note
		for deadline := time.After(10 * time.Second); len(got) < 2 || !strings.Contains(got[len(got)-1].text, "second"); {
			select {
			case n := <-notes:
				got = append(got, n)
				continue
			case <-deadline:
			}
			break
		}
		if len(got) < 2 || !strings.Contains(got[0].text, "first") || strings.Contains(got[0].text, "second") {
			t.Fatalf("progress %+v, want \"first\" alone first, then \"second\"", got)
		}
		// The first line came while the command still slept, not with the result.
		if lead := returned.Sub(got[0].at); lead < time.Second {
			t.Fatalf("the first line arrived %s before the result; want it while the command ran", lead)
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		if _, err := mcpConnect(cctx, m.endpoint(m.run.ID), "sbx_not-a-token"); err == nil {
			t.Fatal("connect with a wrong token succeeded")
		}
		for _, tok := range []string{"", "sbx_not-a-token"} {
			req, _ := http.NewRequestWithContext(cctx, http.MethodPost, m.endpoint(m.run.ID), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("token %q: %d %v, want 401 with WWW-Authenticate", tok, resp.StatusCode, resp.Header)
			}
		}
	})

	t.Run("deleting the run ends its sessions", func(t *testing.T) {
		r2, err := m.d.Client.CreateRun(cctx, api.CreateRunRequest{Conversation: "conv-mcp"})
		if err != nil {
			t.Fatal(err)
		}
		s2, err := mcpConnect(cctx, m.endpoint(r2.ID), m.d.Token)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		if err := s2.Ping(cctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := m.d.Client.DeleteRun(cctx, r2.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s2.ListTools(cctx, nil); err == nil {
			t.Fatal("a session of a deleted run still lists tools")
		}
	})
}

// TestMCPTypeScriptSDK: the TypeScript SDK's client (npm, pinned by
// e2e/testdata/mcp-ts/package-lock.json) lists a run's tools and calls
// write, read and an eval that displays a PNG.
func TestMCPTypeScriptSDK(t *testing.T) {
	dir := npmInstallMCPClient(t)
	m := newMCPRig(t)
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "node", filepath.Join(dir, "client.mjs"))
	cmd.Env = append(os.Environ(), "MCP_URL="+m.endpoint(m.run.ID), "MCP_TOKEN="+m.d.Token, "MCP_PNG_CODE="+mcpPNGCell)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	type block struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
	}
	type result struct {
		Content []block `json:"content"`
		IsError bool    `json:"isError"`
	}
	var got struct {
		ProtocolVersion string `json:"protocolVersion"`
		SessionID       string `json:"sessionId"`
		Server          struct {
			Name string `json:"name"`
		} `json:"server"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
			ReadOnly    *bool           `json:"readOnly"`
		} `json:"tools"`
		Write, Read, Image result
		Unknown            string `json:"unknown"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client.mjs printed %q: %v", out, err)
	}
	if got.ProtocolVersion != "2025-06-18" || got.SessionID == "" || got.Server.Name != "sandboxd" {
		t.Errorf("negotiated %q, session %q, server %q", got.ProtocolVersion, got.SessionID, got.Server.Name)
	}
	specs, err := m.d.Client.Tools(cctx, m.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tools) != len(specs) {
		t.Fatalf("the TS client lists %d tools, the run %d", len(got.Tools), len(specs))
	}
	for i, tool := range got.Tools {
		if tool.Name != specs[i].Name || !jsonEqual(t, tool.InputSchema, specs[i].InputSchema) || tool.ReadOnly == nil || *tool.ReadOnly != (specs[i].Level == "read") {
			t.Errorf("tool %d: %s %s, run %s %s", i, tool.Name, tool.InputSchema, specs[i].Name, specs[i].InputSchema)
		}
	}
	if got.Write.IsError || got.Read.IsError || len(got.Read.Content) == 0 || !strings.Contains(got.Read.Content[0].Text, "from typescript") {
		t.Errorf("write %+v, read %+v", got.Write, got.Read)
	}
	var found bool
	for _, b := range got.Image.Content {
		if b.Type == "image" {
			raw, err := base64.StdEncoding.DecodeString(b.Data)
			if err != nil {
				t.Fatalf("image data: %v", err)
			}
			checkPNG(t, raw, b.MimeType)
			found = true
		}
	}
	if got.Image.IsError || !found {
		t.Errorf("eval of a PNG display = %+v", got.Image)
	}
	if !strings.Contains(got.Unknown, "-32602") || !strings.Contains(got.Unknown, "not available to this run") {
		t.Errorf("an unknown tool = %q, want JSON-RPC -32602 naming it", got.Unknown)
	}
	// The client ended its session with DELETE: the id is gone.
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, m.endpoint(m.run.ID), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+m.d.Token)
	req.Header.Set(mcpSessionHeader, got.SessionID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("ping on the terminated session = %d, want 404", resp.StatusCode)
	}
}

const mcpSessionHeader = "Mcp-Session-Id"

// npmInstallMCPClient installs the pinned TypeScript SDK (npm ci, from the
// lockfile) into a git-ignored folder under .cache/ and returns it; an
// install whose lockfile is unchanged is reused.
func npmInstallMCPClient(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("SANDBOXD_TEST_DOCKER") == "1" {
			t.Fatal("npm is not installed; install nodejs and npm (scripts/install-ast-grep.sh does on Debian)")
		}
		t.Skip("npm is not installed")
	}
	src := filepath.Join("testdata", "mcp-ts")
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "mcp-ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Ignored by git whether or not .cache/ has its own ignore file.
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	for _, f := range []string{"package.json", "package-lock.json", "client.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		sum.Write(b)
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stamp := filepath.Join(dir, "node_modules", ".sandboxd-lock-sha256")
	want := hex.EncodeToString(sum.Sum(nil))
	if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
		return dir
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("npm ci did not finish within 5 minutes:\n%s", out)
		}
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
