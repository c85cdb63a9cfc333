package files

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

type shellTool struct{ c *config }

func (t *shellTool) Spec() tools.Spec {
	def, max := int(t.c.shellDefault/time.Second), int(t.c.shellMax/time.Second)
	return tools.Spec{
		Name: "shell",
		Description: fmt.Sprintf("Run a shell command in the sandbox (bash when the sandbox has it, else sh) and wait for it. "+
			"Returns the exit status and the command's stdout and stderr; each keeps at most %d bytes (the head and the tail, "+
			"with the number of bytes left out in between). The command runs in the run's working directory unless workdir "+
			"is given. After timeout_s seconds (default %d, at most %d) it is killed with every process it started. "+
			"Processes it leaves running in the background (cmd &, nohup, daemons) keep running after it exits until "+
			"timeout_s has passed since the call began, then they are killed too; what they print after the command exits is not shown. "+
			"Nothing is kept between calls (no cd, no variables); stdin is empty, so interactive programs fail.",
			t.c.shellOutput, def, max),
		Level:        tools.LevelExec,
		ParallelSafe: false,
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "command":   {"type": "string", "minLength": 1, "description": "The command line, as typed into a shell."},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Seconds before the command is killed (default %d, at most %d)."},
    "workdir":   {"type": "string", "minLength": 1, "description": "Directory to run in: relative to the run's working directory, or absolute inside the workspace."}
  },
  "required": ["command"],
  "additionalProperties": false
}`, max, def, max)),
	}
}

func (t *shellTool) Available(env *tools.Env) bool { return available(env) }

// shellScript prefers bash (models write bash) and falls back to sh; the
// command arrives as $1, so it is never re-quoted.
const shellScript = `if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; else exec sh -c "$1"; fi`

func (t *shellTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a struct {
		Command  string `json:"command"`
		TimeoutS int    `json:"timeout_s"`
		Workdir  string `json:"workdir"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	timeout := t.c.shellDefault
	if a.TimeoutS > 0 {
		timeout = min(time.Duration(a.TimeoutS)*time.Second, t.c.shellMax)
	}
	conn, res, err := connect(ctx, env)
	if conn == nil {
		return tools.Deref(res), err
	}
	dir, msg, err := execDir(ctx, env, conn, a.Workdir)
	if msg != "" || err != nil {
		return tools.Error(msg), err
	}
	// The agent enforces the timeout; the extra minute only bounds a lost
	// response.
	ectx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	req := &proto.ExecRequest{
		Argv:     []string{"/bin/sh", "-c", shellScript, "sh", a.Command},
		Dir:      dir,
		Timeout:  timeout,
		MaxBytes: t.c.shellOutput,
	}
	var out *proto.ExecResponse
	if sink := tools.OutputSinkFrom(ctx); sink != nil {
		out, err = conn.Agent.ExecStream(ectx, req, liveShell(sink))
	} else {
		out, err = conn.Agent.Exec(ectx, req)
	}
	if err != nil {
		return fail(err)
	}
	return formatExec(out, timeout, t.c.shellOutput), nil
}

// formatExec renders an exec result for the model. A non-zero exit is not
// an is_error result — the model reads the status like a person would — but
// a timeout is, since the command did not finish, and so is a kill for the
// sandbox's pid reserve.
func formatExec(r *proto.ExecResponse, timeout time.Duration, capBytes int) tools.Result {
	var b strings.Builder
	switch {
	case r.TimedOut && r.Killed > 0:
		fmt.Fprintf(&b, "timed out after %s; the command and every process it started were killed (%s)", timeout, processes(r.Killed))
	case r.TimedOut:
		fmt.Fprintf(&b, "timed out after %s; the command and its process group were killed", timeout)
	case r.Signal != "":
		fmt.Fprintf(&b, "killed by signal %s", r.Signal)
	default:
		fmt.Fprintf(&b, "exit status %d", r.ExitCode)
	}
	switch {
	case r.OutOfPids:
		fmt.Fprintf(&b, "\nthe sandbox ran out of processes")
		if r.PidsLimit > 0 {
			fmt.Fprintf(&b, " (%d of %d in use; %d are kept free for the sandbox's own tools)", r.PidsInUse, r.PidsLimit, r.PidsReserve)
		}
		fmt.Fprintf(&b, ", so every process this command started was killed (%s); look for a command that forks without end", processes(r.Killed))
	case r.Left > 0 && !r.TimedOut:
		fmt.Fprintf(&b, "\nthe command left %s running in the background (%s); they run until this call's timeout of %s has passed since it began (%s), then they are killed; give a larger timeout_s to keep them longer",
			processes(r.Left), pidList(r.LeftPIDs, r.Left), timeout, r.LeftUntil.UTC().Format(time.TimeOnly+" UTC"))
	}
	section(&b, "stdout", r.Stdout, r.StdoutOmitted, capBytes)
	section(&b, "stderr", r.Stderr, r.StderrOmitted, capBytes)
	res := tools.Text(b.String())
	res.IsError = r.TimedOut || r.OutOfPids
	return res
}

func processes(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}

// pidList names the pids the agent listed and says how many it did not.
func pidList(pids []int, total int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	out := "pid " + strings.Join(s, ", ")
	if total > 1 {
		out = "pids " + strings.Join(s, ", ")
	}
	if total > len(pids) {
		out += fmt.Sprintf(" and %d more", total-len(pids))
	}
	return out
}

// section writes one output stream. The agent keeps the first capBytes/2
// bytes and the last ones; the marker goes where it cut.
func section(b *strings.Builder, name string, data []byte, omitted int64, capBytes int) {
	if len(data) == 0 && omitted == 0 {
		fmt.Fprintf(b, "\n--- %s: (empty)", name)
		return
	}
	fmt.Fprintf(b, "\n--- %s ---\n", name)
	text := string(data)
	if omitted > 0 {
		cut := min(capBytes/2, len(text))
		text = strings.ToValidUTF8(text[:cut], "\uFFFD") +
			fmt.Sprintf("\n[... %d bytes omitted ...]\n", omitted) +
			strings.ToValidUTF8(text[cut:], "\uFFFD")
	} else {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	b.WriteString(strings.TrimSuffix(text, "\n"))
}
