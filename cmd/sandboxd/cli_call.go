package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sandboxd/sandboxd/api"
)

// maxArgsInput caps tool arguments read from stdin.
const maxArgsInput = 16 << 20

func runTools(ctx context.Context, args []string, stdout io.Writer) error {
	var cf clientFlags
	var runID string
	cmd := newCommand("tools", "sandboxd tools --run RUN [--json]")
	cf.register(cmd.fs)
	cmd.fs.StringVar(&runID, "run", "", "run id (required)")
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || runID == "" {
		return cmd.bad()
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	specs, err := c.Tools(ctx, runID)
	if err != nil {
		return err
	}
	if cf.json {
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
	var stream bool
	cmd := newCommand("call", `sandboxd call --run RUN [--stream] [--json] TOOL ['{"json": "args"}' | -]`)
	cf.register(cmd.fs)
	cmd.fs.StringVar(&runID, "run", "", "run id (required)")
	cmd.fs.BoolVar(&stream, "stream", false, "print the call's output to stdout and stderr as it comes, then the result")
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if runID == "" || len(pos) < 1 || len(pos) > 2 {
		return cmd.bad()
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
	if cf.json {
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
