package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
)

// maxArgsInput caps tool arguments read from stdin.
const maxArgsInput = 16 << 20

// errToolFailed: the tool answered is_error; its text is already printed.
var errToolFailed = errors.New("the tool reported an error")

// clientFlags are the flags every client command takes.
type clientFlags struct {
	addr, token, dataDir string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", envOr("SANDBOXD_ADDR", "http://127.0.0.1:7788"), "sandboxd address")
	fs.StringVar(&c.token, "token", "", "bearer token (default $SANDBOXD_TOKEN, else DATA_DIR/token)")
	fs.StringVar(&c.dataDir, "data-dir", envOr("SANDBOXD_DATA_DIR", ".data"), "data dir holding the admin token")
}

func (c *clientFlags) client() (*client.Client, error) {
	tok := c.token
	if tok == "" {
		tok = os.Getenv("SANDBOXD_TOKEN")
	}
	if tok == "" {
		path := filepath.Join(c.dataDir, api.TokenFileName)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("no token: %s cannot be read (%v); pass --token, set SANDBOXD_TOKEN, or point --data-dir at the server's data dir", path, err)
		}
		tok = strings.TrimSpace(string(b))
	}
	return client.New(c.addr, tok)
}

// parseMixed parses flags that may come before or after positional
// arguments (`sandbox get ID --addr X`), returning the positionals.
func parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var help strings.Builder
	fs.SetOutput(&help)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				help.Reset()
				fs.PrintDefaults()
				return nil, usagef("flags of %s:\n%s", fs.Name(), help.String())
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runSandbox(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("sandbox needs a subcommand: create, list, get or delete")
	}
	var cf clientFlags
	fs := flag.NewFlagSet("sandbox "+args[0], flag.ContinueOnError)
	cf.register(fs)
	switch args[0] {
	case "create":
		var req api.CreateSandboxRequest
		var res api.Resources
		var hostPath string
		var env multiFlag
		fs.StringVar(&req.Conversation, "conversation", "", "conversation id (required)")
		fs.StringVar(&req.Image, "image", "", "image (default: the configured default image)")
		fs.StringVar(&req.Network, "network", "", "none (default) or bridge")
		fs.StringVar(&hostPath, "host-path", "", "host directory to use as the workspace")
		fs.Float64Var(&res.CPUs, "cpus", 0, "CPU limit")
		fs.Int64Var(&res.MemoryMB, "memory-mb", 0, "memory limit in MiB")
		fs.Int64Var(&res.Pids, "pids", 0, "process limit")
		fs.Var(&env, "env", "environment variable K=V (repeatable)")
		pos, err := parseMixed(fs, args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 || req.Conversation == "" {
			return usagef("usage: sandboxd sandbox create --conversation ID [--image IMG] [--network none|bridge] [--host-path DIR] ...")
		}
		if res != (api.Resources{}) {
			req.Resources = &res
		}
		if hostPath != "" {
			req.Workspace = &api.Workspace{HostPath: hostPath}
		}
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usagef("--env %q is not K=V", kv)
			}
			if req.Env == nil {
				req.Env = map[string]string{}
			}
			req.Env[k] = v
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		sb, err := c.CreateSandbox(ctx, req)
		if err != nil {
			return err
		}
		return printJSON(stdout, sb)
	case "list":
		var conv string
		fs.StringVar(&conv, "conversation", "", "only this conversation's sandbox")
		if pos, err := parseMixed(fs, args[1:]); err != nil || len(pos) > 0 {
			return usagef("usage: sandboxd sandbox list [--conversation ID]")
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		list, err := c.ListSandboxes(ctx, conv)
		if err != nil {
			return err
		}
		return printJSON(stdout, list)
	case "get", "delete":
		pos, err := parseMixed(fs, args[1:])
		if err != nil || len(pos) != 1 {
			return usagef("usage: sandboxd sandbox %s ID", args[0])
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		if args[0] == "delete" {
			if err := c.DeleteSandbox(ctx, pos[0]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted %s\n", pos[0])
			return nil
		}
		sb, err := c.GetSandbox(ctx, pos[0])
		if err != nil {
			return err
		}
		return printJSON(stdout, sb)
	}
	return usagef("sandbox %q is not a subcommand; use create, list, get or delete", args[0])
}

func runRun(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("run needs a subcommand: create or delete")
	}
	var cf clientFlags
	fs := flag.NewFlagSet("run "+args[0], flag.ContinueOnError)
	cf.register(fs)
	switch args[0] {
	case "create":
		var req api.CreateRunRequest
		fs.StringVar(&req.Conversation, "conversation", "", "conversation id (required)")
		fs.StringVar(&req.Surface, "surface", "", "default, plan or readonly")
		fs.StringVar(&req.Workdir, "workdir", "", "working directory (default /workspace)")
		fs.BoolVar(&req.Vibe, "vibe", false, "enable background workers")
		fs.StringVar(&req.Space, "space", "", "space that questions go to")
		fs.StringVar(&req.Approval, "approval", "", "auto or ask")
		fs.StringVar(&req.Parent, "parent", "", "parent run id")
		pos, err := parseMixed(fs, args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 || req.Conversation == "" {
			return usagef("usage: sandboxd run create --conversation ID [--surface default|plan|readonly] ...")
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		run, err := c.CreateRun(ctx, req)
		if err != nil {
			return err
		}
		return printJSON(stdout, run)
	case "delete":
		pos, err := parseMixed(fs, args[1:])
		if err != nil || len(pos) != 1 {
			return usagef("usage: sandboxd run delete RUN")
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		if err := c.DeleteRun(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "ended %s\n", pos[0])
		return nil
	}
	return usagef("run %q is not a subcommand; use create or delete", args[0])
}

func runTools(ctx context.Context, args []string, stdout io.Writer) error {
	var cf clientFlags
	var runID string
	var asJSON bool
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	cf.register(fs)
	fs.StringVar(&runID, "run", "", "run id (required)")
	fs.BoolVar(&asJSON, "json", false, "print the full tool specs as JSON")
	pos, err := parseMixed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || runID == "" {
		return usagef("usage: sandboxd tools --run RUN [--json]")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	specs, err := c.Tools(ctx, runID)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, specs)
	}
	for _, s := range specs {
		fmt.Fprintf(stdout, "%-14s %-5s %s\n", s.Name, s.Level, firstSentence(s.Description))
	}
	return nil
}

func runCall(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var cf clientFlags
	var runID string
	var asJSON, stream bool
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	cf.register(fs)
	fs.StringVar(&runID, "run", "", "run id (required)")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.BoolVar(&stream, "stream", false, "print the call's output to stdout and stderr as it comes, then the result")
	pos, err := parseMixed(fs, args)
	if err != nil {
		return err
	}
	if runID == "" || len(pos) < 1 || len(pos) > 2 {
		return usagef(`usage: sandboxd call --run RUN [--stream] [--json] TOOL ['{"json": "args"}' | -]`)
	}
	var argsJSON json.RawMessage
	if len(pos) == 2 {
		argsJSON = json.RawMessage(pos[1])
		if pos[1] == "-" {
			b, err := io.ReadAll(io.LimitReader(stdin, maxArgsInput+1))
			if err != nil {
				return fmt.Errorf("tool arguments cannot be read from stdin: %w", err)
			}
			if len(b) > maxArgsInput {
				return usagef("tool arguments on stdin are larger than %d bytes", maxArgsInput)
			}
			argsJSON = b
		}
		if !json.Valid(argsJSON) {
			return usagef("tool arguments are not valid JSON; pass one object such as '{\"path\": \"README.md\"}'")
		}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var res api.ToolResult
	if stream {
		live := &liveOutput{stdout: stdout, stderr: stderr}
		res, err = c.CallToolStream(ctx, runID, pos[0], argsJSON, live.write)
		live.end()
	} else {
		res, err = c.CallTool(ctx, runID, pos[0], argsJSON)
	}
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		for _, b := range res.Content {
			switch b.Type {
			case "text":
				fmt.Fprintln(stdout, strings.TrimRight(b.Text, "\n"))
			default:
				fmt.Fprintf(stdout, "[%s %s, %d base64 bytes]\n", b.Type, b.MimeType, len(b.Data))
			}
		}
	}
	if res.IsError {
		return errToolFailed
	}
	return nil
}

// liveOutput writes a streamed call's output where it came from.
type liveOutput struct {
	stdout, stderr io.Writer
	open           bool // stdout's last text did not end a line
}

func (l *liveOutput) write(ev api.OutputEvent) {
	w := l.stdout
	if ev.Stream == "stderr" {
		w = l.stderr
	} else {
		l.open = !strings.HasSuffix(ev.Text, "\n")
	}
	io.WriteString(w, ev.Text)
}

// end finishes a line the output left open, so the result starts on its own.
func (l *liveOutput) end() {
	if l.open {
		io.WriteString(l.stdout, "\n")
		l.open = false
	}
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// firstSentence keeps a tool listing to one line per tool; --json shows all.
func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
