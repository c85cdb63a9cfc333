package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Runs and arguments are checked where the mistake is made: these tests
// drive the built daemon over HTTP as a platform would, on the host
// backend and (SANDBOXD_TEST_DOCKER=1) on Docker.

// checksDaemon starts sandboxd with workers configured (so the vibe tools
// register) and, with extra config, some families turned off.
func checksDaemon(t *testing.T, backend, extraConfig string) *daemon {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sandboxd.yaml")
	if err := os.WriteFile(cfg, []byte("workers:\n  fast: {command: [\"true\"]}\n"+extraConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, backend, filepath.Join(dir, "data"), "--config", cfg)
}

func sandboxFor(t *testing.T, d *daemon, backend, conv string) api.Sandbox {
	t.Helper()
	sb, err := d.Client.CreateSandbox(ctx(t), createReq(backend, conv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.Client.DeleteSandbox(c, sb.ID)
	})
	return sb
}

func wantInvalid(t *testing.T, err error, what string, parts ...string) {
	t.Helper()
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("%s: %v, want invalid_argument", what, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q lacks %q", what, err, p)
		}
	}
}

// approval "ask" without a space is a 400 naming the space, and leaves no run.
func TestAskWithoutSpaceIsRefused(t *testing.T) {
	d := startDaemon(t, "host", t.TempDir())
	_, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ask", Approval: "ask"})
	wantInvalid(t, err, "ask without space", `approval "ask" needs a space`, `"space"`)
	runs, err := d.Client.Runs(ctx(t))
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs after the refusal: %+v %v", runs, err)
	}
	if _, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-ask", Approval: "ask", Space: "desk"}); err != nil {
		t.Fatalf("ask with a space: %v", err)
	}
}

// A run whose conversation has no sandbox says which tools are absent and
// why, in POST /v1/runs and GET /v1/runs/{id}; a call of one is a 404 with
// that reason; once a sandbox exists the same run has them. Families the
// config turns off are named with the config key.
func TestRunWithoutSandboxSaysWhy(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := checksDaemon(t, backend, "debug: {disabled: true}\nlsp: {enabled: false}\n")
			conv := "conv-why-" + backend
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
			if err != nil {
				t.Fatal(err)
			}
			reasons := map[string]string{}
			for _, u := range run.Unavailable {
				for _, name := range u.Tools {
					reasons[name] = u.Reason
				}
			}
			noSandbox := fmt.Sprintf(`the conversation %q has no sandbox; create one with POST /v1/sandboxes {"conversation": %q}`, conv, conv)
			for _, name := range []string{"read", "write", "edit", "apply_patch", "shell", "process", "ast_grep", "ast_edit", "resolve"} {
				if !strings.HasPrefix(reasons[name], noSandbox) {
					t.Errorf("%s: reason %q", name, reasons[name])
				}
			}
			for name, part := range map[string]string{"ask_user": `"space"`, "vibe_spawn": `"vibe": true`, "vibe_list": `"vibe": true`,
				"debug": "debug.disabled: true", "lsp": "lsp.enabled: false", "lsp_rename": "lsp.enabled: false"} {
				if !strings.Contains(reasons[name], part) {
					t.Errorf("%s: reason %q lacks %q", name, reasons[name], part)
				}
			}
			for _, spec := range run.Tools {
				if _, absent := reasons[spec.Name]; absent {
					t.Errorf("%s is both listed and unavailable", spec.Name)
				}
			}
			got, err := d.Client.GetRun(ctx(t), run.ID)
			if err != nil || got.ID != run.ID || !slices.Equal(toolNames(got.Tools), toolNames(run.Tools)) || len(got.Unavailable) != len(run.Unavailable) {
				t.Fatalf("GET run: %+v %v", got, err)
			}
			_, err = d.Client.CallTool(ctx(t), run.ID, "read", json.RawMessage(`{"path":"a.txt"}`))
			if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `tool "read" is not available to this run: `+noSandbox) {
				t.Fatalf("read without a sandbox: %v", err)
			}
			_, err = d.Client.CallTool(ctx(t), run.ID, "debug", json.RawMessage(`{"operation":"adapters"}`))
			if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "debug.disabled: true") {
				t.Fatalf("debug turned off: %v", err)
			}

			sandboxFor(t, d, backend, conv)
			got, err = d.Client.GetRun(ctx(t), run.ID)
			if err != nil || !slices.Contains(toolNames(got.Tools), "read") {
				t.Fatalf("after the sandbox: %+v %v", got, err)
			}
			for _, u := range got.Unavailable {
				if slices.Contains(u.Tools, "read") {
					t.Errorf("read still unavailable: %+v", u)
				}
			}
			mustCall(t, d, run.ID, "write", map[string]any{"path": "a.txt", "content": "here\n"})
		})
	}
}

// sample returns a valid value for a schema node, to fill the required
// arguments around the one under test.
func sample(s map[string]any) any {
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	switch s["type"] {
	case "integer", "number":
		if m, ok := s["minimum"]; ok {
			return m
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			out[r.(string)] = sample(props[r.(string)].(map[string]any))
		}
		return out
	}
	return "x"
}

// numericProps lists a tool's integer and number arguments, top level and
// inside arrays ("lines[0]"), with a builder that puts a raw value there.
func numericProps(schema map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		ps := p.(map[string]any)
		switch ps["type"] {
		case "integer", "number":
			out[name] = ps
		case "array":
			if it, ok := ps["items"].(map[string]any); ok && (it["type"] == "integer" || it["type"] == "number") {
				out[name+"[0]"] = it
			}
		}
	}
	return out
}

// Every integer and number argument of every tool has a declared range,
// and out-of-range values and non-integers get is_error with one
// error message naming the argument (never decoder text or "internal error");
// an unknown argument is named with what was meant even when a required
// one is missing.
func TestArgumentsNamedAndBounded(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := checksDaemon(t, backend, "")
			conv := "conv-args-" + backend
			sandboxFor(t, d, backend, conv)
			run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv, Space: "desk", Vibe: true})
			if err != nil {
				t.Fatal(err)
			}
			names := toolNames(run.Tools)
			for _, want := range []string{"read", "shell", "lsp", "debug", "ask_user", "vibe_wait", "eval"} {
				if !slices.Contains(names, want) {
					t.Fatalf("the run lacks %s: %v", want, names)
				}
			}
			bad := map[string]string{"9223372036854775808": "must be at most", "1e999": "must be at most", "1e+308": "must be at most",
				"-9223372036854775809": "must be at least", "-1e400": "must be at least"}
			checked := 0
			for _, spec := range run.Tools {
				var schema map[string]any
				if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
					t.Fatal(err)
				}
				for prop, ps := range numericProps(schema) {
					_, hasMin := ps["minimum"]
					_, hasMax := ps["maximum"]
					if !hasMin || !hasMax {
						t.Errorf("%s.%s has no declared range: %v", spec.Name, prop, ps)
					}
					values := maps(bad)
					if ps["type"] == "integer" {
						values["1.5"] = "must be an integer"
						values[`"7"`] = "must be an integer"
					}
					for raw, want := range values {
						args := sample(schema).(map[string]any)
						field := strings.TrimSuffix(prop, "[0]")
						if field != prop {
							args[field] = []json.RawMessage{json.RawMessage(raw)}
						} else {
							args[field] = json.RawMessage(raw)
						}
						body, _ := json.Marshal(args)
						res, err := d.Client.CallTool(ctx(t), run.ID, spec.Name, body)
						if err != nil {
							t.Fatalf("%s %s: %v", spec.Name, body, err)
						}
						text := res.Text()
						if !res.IsError || !strings.HasPrefix(text, fmt.Sprintf("argument %q %s", prop, want)) ||
							strings.Contains(text, "internal") || strings.Contains(text, "json:") || strings.Contains(text, "\n") {
							t.Errorf("%s %s: is_error=%v %q", spec.Name, body, res.IsError, text)
						}
						checked++
					}
				}
			}
			t.Logf("%d out-of-range calls checked", checked)
			if checked < 40 {
				t.Fatalf("only %d out-of-range calls were checked", checked)
			}

			// A misspelt argument is named, with what was meant, even when
			// the required one is missing.
			for _, c := range []struct{ tool, args, want string }{
				{"read", `{"file":"x"}`, `unknown argument "file"; did you mean "path"?`},
				{"shell", `{"cmd":"ls"}`, `unknown argument "cmd"; did you mean "command"?`},
				{"lsp", `{"action":"hover","path":"a.go","line":1,"symbol":"x"}`, `unknown argument "path"; did you mean "file"?`},
				{"write", `{"path":"a.txt","contents":"x"}`, `unknown argument "contents"; did you mean "content"?`},
			} {
				res, err := d.Client.CallTool(ctx(t), run.ID, c.tool, json.RawMessage(c.args))
				if err != nil || !res.IsError || !strings.HasPrefix(res.Text(), c.want) {
					t.Errorf("%s %s: %+v %v, want %q", c.tool, c.args, res, err, c.want)
				}
			}
			// An integer spelled 2.0 is an integer: the call runs.
			mustCall(t, d, run.ID, "write", map[string]any{"path": "n.txt", "content": "one\ntwo\nthree\n"})
			out, err := d.Client.CallTool(ctx(t), run.ID, "read", json.RawMessage(`{"path":"n.txt","offset":2.0,"limit":1e0}`))
			if err != nil || out.IsError || !strings.Contains(out.Text(), "two") || strings.Contains(out.Text(), "three") {
				t.Fatalf("read with 2.0 and 1e0: %+v %v", out, err)
			}
		})
	}
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A workdir outside the workspace is refused at POST /v1/runs, before and
// after the conversation has a sandbox; a relative one is taken from the
// workspace. A debug breakpoint outside the workspace is refused.
func TestWorkdirAndBreakpointsStayInWorkspace(t *testing.T) {
	for _, backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			d := checksDaemon(t, backend, "")
			conv := "conv-wd-" + backend
			_, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv, Workdir: "/etc"})
			wantInvalid(t, err, "/etc before a sandbox", `workdir "/etc" is outside the workspace`, "has no sandbox yet")

			sb := sandboxFor(t, d, backend, conv)
			for _, wd := range []string{"/etc", "../../etc", "/", "/workspacex", filepath.Dir(sb.Workspace)} {
				_, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv, Workdir: wd})
				wantInvalid(t, err, "workdir "+wd, "is outside the sandbox's workspace")
			}
			root, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv})
			if err != nil {
				t.Fatal(err)
			}
			mustCall(t, d, root.ID, "shell", map[string]any{"command": "mkdir -p sub/deeper"})
			sub, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: conv, Workdir: "sub/deeper"})
			if err != nil || sub.Workdir != "/workspace/sub/deeper" {
				t.Fatalf("relative workdir: %+v %v", sub, err)
			}
			if pwd := mustCall(t, d, sub.ID, "shell", map[string]any{"command": "pwd"}); !strings.Contains(pwd, "/sub/deeper") {
				t.Fatalf("pwd in sub/deeper: %q", pwd)
			}

			for _, file := range []string{"/etc/passwd", "../../../../../../../etc/passwd"} {
				_, err := call(t, d, sub.ID, "debug", map[string]any{"operation": "breakpoints", "file": file, "lines": []int{1}})
				if err == nil || !strings.Contains(err.Error(), "is outside the workspace") {
					t.Errorf("breakpoint in %s: %v", file, err)
				}
			}
			if out := mustCall(t, d, sub.ID, "debug", map[string]any{"operation": "breakpoints", "file": "main.py", "lines": []int{1}}); !strings.Contains(out, "saved") {
				t.Errorf("breakpoint in main.py: %q", out)
			}
			if out := mustCall(t, d, sub.ID, "debug", map[string]any{"operation": "status"}); !strings.Contains(out, "1 file(s) with breakpoints") {
				t.Errorf("status: %q (a refused file was kept?)", out)
			}
		})
	}
}

// A body trickled a byte a second over a real TCP connection is cut off
// with a 400 that says so and the connection closed, while the daemon goes
// on serving others.
func TestSlowBodyIsCutOff(t *testing.T) {
	d := startDaemon(t, "host", t.TempDir())
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second)) // bounds every wait below
	body := `{"conversation":"conv-slow"}` + strings.Repeat(" ", 200)
	fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		u.Host, d.Token, len(body))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	// Others are served meanwhile.
	if _, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: "conv-other"}); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb api.ErrorBody
	if resp.StatusCode != 400 || json.Unmarshal(b, &eb) != nil || eb.Error.Code != "invalid_argument" ||
		!strings.Contains(eb.Error.Message, "request body arrived too slowly") {
		t.Fatalf("answer %d %s", resp.StatusCode, b)
	}
	// EOF, or a reset when sandboxd closed with body bytes unread; a
	// timeout (the deadline above) means the connection stayed open.
	var ne net.Error
	if _, err := br.ReadByte(); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection stayed open after the answer: %v", err)
	}
	runs, err := d.Client.Runs(ctx(t))
	if err != nil || len(runs) != 1 || runs[0].Conversation != "conv-other" {
		t.Fatalf("runs: %+v %v", runs, err)
	}
}
