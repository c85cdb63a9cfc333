package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

type readTool struct{ c *config }

func (t *readTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "read",
		Description: fmt.Sprintf("Read a text file from the sandbox's workspace. Returns its lines numbered from 1 (like cat -n: "+
			"line number, a tab, the line). At most %d lines per call (set limit for fewer, offset to start later; the answer says how "+
			"many lines follow and which offset continues). Lines longer than %d characters are cut with a note. "+
			"Binary files are refused. Paths are relative to the run's working directory, or absolute inside the workspace; "+
			"nothing outside the workspace can be read.", t.c.readLines, t.c.maxLineChars),
		Level:        tools.LevelRead,
		ParallelSafe: true,
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path":   {"type": "string", "minLength": 1, "description": "File to read: relative to the working directory, or absolute inside the workspace."},
    "offset": {"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "1-based line number to start at (default 1)."},
    "limit":  {"type": "integer", "minimum": 1, "maximum": %d, "description": "How many lines to return (default and maximum %d)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`, t.c.readLines, t.c.readLines)),
	}
}

func (t *readTool) Available(env *tools.Env) bool { return available(env) }

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func (t *readTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a readArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	conn, res, err := connect(ctx, env)
	if conn == nil {
		return tools.Deref(res), err
	}
	abs, msg := resolve(env, conn, "path", a.Path)
	if msg != "" {
		return tools.Error(msg), nil
	}
	fctx, cancel := t.c.fileCtx(ctx)
	defer cancel()
	resp, err := conn.Agent.ReadFile(fctx, &proto.ReadFileRequest{Root: conn.Workspace, Path: abs, MaxBytes: t.c.maxFileBytes})
	if errors.Is(err, errdefs.ErrInvalidArgument) {
		// The agent's error message for a directory names its own walk op;
		// the model lists directories with shell.
		if st, serr := conn.Agent.Stat(fctx, &proto.StatRequest{Root: conn.Workspace, Path: abs}); serr == nil && st.IsDir {
			return tools.Error(fmt.Sprintf("%s is a directory, not a file; list it with shell (for example ls -la)", abs)), nil
		}
	}
	if err != nil {
		return t.c.failFile(ctx, fctx, err, "the read of "+abs, "nothing was read; retry, or look at the file with shell")
	}
	return formatRead(abs, resp.Data, resp.Size, resp.Truncated, a.Offset, a.Limit, t.c), nil
}

// isBinary follows git's rule: a NUL byte in the first 8000 bytes.
func isBinary[T string | []byte](data T) bool {
	for _, c := range []byte(data[:min(len(data), 8000)]) {
		if c == 0 {
			return true
		}
	}
	return false
}

// formatRead renders lines offset.. of data as numbered lines. size is the
// file's full length; truncated says data holds only its first part.
func formatRead(name string, data []byte, size int64, truncated bool, offset, limit int, c *config) tools.Result {
	if offset <= 0 {
		offset = 1
	}
	if limit <= 0 || limit > c.readLines {
		limit = c.readLines
	}
	if size == 0 {
		return tools.Text(fmt.Sprintf("%s is empty (0 bytes).", name))
	}
	if isBinary(data) {
		return tools.Error(fmt.Sprintf("%s is a binary file (%d bytes); read shows text only, so inspect it with shell (for example `file` or `xxd | head`).", name, size))
	}
	text := string(data)
	if truncated {
		// The last line in data may be cut; keep whole lines only.
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i+1]
		}
	}
	crlf := strings.Contains(text, "\r\n")
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total := len(lines)
	if offset > total {
		if truncated {
			return tools.Error(fmt.Sprintf("offset %d is beyond the first %d lines of %s that can be read (the file has %d bytes, over the %d-byte cap); use shell, e.g. sed -n '%d,%dp', for the rest.",
				offset, total, name, size, c.maxFileBytes, offset, offset+limit-1))
		}
		return tools.Error(fmt.Sprintf("offset %d is past the end of %s, which has %d lines; give an offset from 1 to %d.", offset, name, total, total))
	}
	end := min(offset-1+limit, total)
	// Sized for the lines and their numbers, so the result is built in
	// one allocation: read is the call every conversation makes most.
	b := make([]byte, 0, min(len(text)+8*(end-offset+1), c.readOutput+64))
	i := offset - 1
	for ; i < end; i++ {
		line := strings.TrimSuffix(strings.TrimSuffix(lines[i], "\n"), "\r")
		if !utf8.ValidString(line) {
			line = strings.ToValidUTF8(line, "\uFFFD")
		}
		// More bytes than the cap in characters is the only way to be over it.
		if len(line) > c.maxLineChars {
			if n := utf8.RuneCountInString(line); n > c.maxLineChars {
				r := []rune(line)
				line = string(r[:c.maxLineChars]) + fmt.Sprintf(" [line cut: %d more characters]", n-c.maxLineChars)
			}
		}
		if len(b) > 0 && len(b)+numberedLen(i+1, line) > c.readOutput {
			break
		}
		b = appendNumbered(b, i+1, line)
	}
	var notes []string
	if rest := total - i; rest > 0 {
		why := ""
		if i < end {
			why = fmt.Sprintf(" (this answer reached its %d-byte cap)", c.readOutput)
		}
		more := fmt.Sprintf("%d more lines", rest)
		if truncated {
			more = fmt.Sprintf("at least %d more lines", rest)
		}
		notes = append(notes, fmt.Sprintf("%s%s; continue with offset=%d.", more, why, i+1))
	} else if truncated {
		notes = append(notes, fmt.Sprintf("the file has %d bytes, over the %d-byte cap, so the lines after %d cannot be read here; use shell, e.g. sed -n '%d,%dp'.",
			size, c.maxFileBytes, total, total+1, total+limit))
	}
	if crlf {
		notes = append(notes, "the file uses CRLF line endings (not shown).")
	}
	if len(notes) > 0 {
		b = append(b, "("+strings.Join(notes, " ")+")\n"...)
	}
	return tools.Text(string(b))
}

// numberedLen is the length of line as appendNumbered writes it.
func numberedLen(n int, line string) int {
	digits := 1
	for v := n; v >= 10; v /= 10 {
		digits++
	}
	return max(digits, 6) + 1 + len(line) + 1
}

// appendNumbered appends line as cat -n shows it: the number right-aligned
// in six columns, a tab, the line, a newline (fmt's "%6d\t%s\n").
func appendNumbered(b []byte, n int, line string) []byte {
	var num [20]byte
	d := strconv.AppendInt(num[:0], int64(n), 10)
	for range 6 - len(d) {
		b = append(b, ' ')
	}
	b = append(b, d...)
	b = append(b, '\t')
	b = append(b, line...)
	return append(b, '\n')
}
