package files

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

// The process tool: programs that outlive the call that started them
// (servers, watchers, test runners in watch mode), owned by the sandbox's
// agent, so they survive the run, a dropped pipe and a sandboxd restart,
// and end with the sandbox. Their output is kept in a bounded ring with
// byte offsets; the tool remembers, per run, where each process's output
// was last read, so "output" without "since" continues from there.

// processTool is the tool; cursors are its only state.
type processTool struct {
	c *config

	// mu guards cursors: the next offset to read per run, sandbox and
	// process, so output without since continues where the run left off.
	mu      sync.Mutex
	cursors map[cursorKey]int64
}

type cursorKey struct{ run, sandbox, proc string }

// maxCursors bounds the remembered cursors; past it they are forgotten
// (output then starts from what the ring holds, saying so).
const maxCursors = 10000

var _ tools.Tool = (*processTool)(nil)

func (t *processTool) Spec() tools.Spec {
	return tools.Spec{
		Name: "process",
		Description: fmt.Sprintf("Start and come back to programs that keep running in the sandbox: dev servers, file watchers, "+
			"test runners in watch mode, anything you will look at again later. Use shell instead for a command that finishes. "+
			"action start runs command (as a shell line) and answers at once with its id (p1, p2, ...) and what it printed in its "+
			"first second (so \"listening on :3000\" or an immediate crash shows); pty {rows, cols} gives it a terminal. "+
			"list shows every process with its state (running, exited N, killed by SIGTERM, stopped by hibernation). "+
			"output shows what a process printed since the cursor (since; without it, since this run last read it) and the next "+
			"cursor; at most %d bytes per call, the head and the tail, with the number of bytes not shown. "+
			"input sends text to its stdin (keys, with a terminal; end with \\n for Enter). signal sends a signal (TERM, INT, HUP, KILL: "+
			"KILL also kills every process it started). wait waits up to timeout_s for it to exit. Processes belong to the sandbox: "+
			"they keep running after this run ends, and their exit status is their own.", t.c.shellOutput),
		Level:        tools.LevelExec,
		ParallelSafe: false,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "action":    {"type": "string", "enum": ["start", "list", "output", "input", "signal", "wait"], "description": "What to do."},
    "command":   {"type": "string", "minLength": 1, "description": "start: the command line, as typed into a shell."},
    "workdir":   {"type": "string", "minLength": 1, "description": "start: directory to run in (relative to the run's working directory, or absolute inside the workspace)."},
    "env":       {"type": "object", "description": "start: environment variables (name to string value) added to the sandbox's."},
    "pty":       {"type": "object", "properties": {"rows": {"type": "integer", "minimum": 1, "maximum": 1000}, "cols": {"type": "integer", "minimum": 1, "maximum": 1000}}, "required": ["rows", "cols"], "additionalProperties": false, "description": "start: run it in a terminal of this size."},
    "id":        {"type": "string", "minLength": 1, "description": "output, input, signal, wait: the process's id (p1, p2, ...)."},
    "since":     {"type": "integer", "minimum": 0, "maximum": 9007199254740991, "description": "output: the cursor to read from (a next cursor an earlier answer gave)."},
    "text":      {"type": "string", "description": "input: what to send."},
    "signal":    {"type": "string", "description": "signal: TERM, INT, HUP, QUIT, USR1, USR2 or KILL."},
    "timeout_s": {"type": "integer", "minimum": 0, "maximum": 600, "description": "wait: how long to wait (default 30)."}
  },
  "required": ["action"],
  "additionalProperties": false
}`),
	}
}

func (t *processTool) Available(env *tools.Env) bool { return available(env) }
func (t *processTool) Why(env *tools.Env) string     { return tools.WhyNoSandbox(env) }

type processArgs struct {
	Action   string            `json:"action"`
	Command  string            `json:"command"`
	Workdir  string            `json:"workdir"`
	Env      map[string]string `json:"env"`
	Pty      *proto.PtySize    `json:"pty"`
	ID       string            `json:"id"`
	Since    *int64            `json:"since"`
	Text     *string           `json:"text"`
	Signal   string            `json:"signal"`
	TimeoutS *int              `json:"timeout_s"`
}

func (t *processTool) Call(ctx context.Context, env *tools.Env, raw json.RawMessage) (tools.Result, error) {
	var a processArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{}, err
	}
	if msg := a.check(); msg != "" {
		return tools.Error(msg), nil
	}
	conn, res, err := connect(ctx, env)
	if conn == nil {
		return tools.Deref(res), err
	}
	switch a.Action {
	case "start":
		return t.start(ctx, env, conn, a)
	case "list":
		return t.list(ctx, conn)
	case "output":
		return t.output(ctx, env, conn, a)
	case "input":
		if err := conn.Agent.ProcInput(ctx, a.ID, []byte(*a.Text), false); err != nil {
			return fail(err)
		}
		return tools.Text(fmt.Sprintf("sent %d bytes to %s", len(*a.Text), a.ID)), nil
	case "signal":
		return t.signal(ctx, conn, a)
	default: // wait
		return t.wait(ctx, conn, a)
	}
}

// check says what an action lacks or has too much of, in one sentence.
func (a processArgs) check() string {
	need := func(what string, ok bool) string {
		if ok {
			return ""
		}
		return fmt.Sprintf("action %s needs %s", a.Action, what)
	}
	switch a.Action {
	case "start":
		return need("command (the command line to run)", strings.TrimSpace(a.Command) != "")
	case "list":
		return ""
	case "output", "wait":
		return need("id (a process id such as p1; action list shows them)", a.ID != "")
	case "input":
		if m := need("id (a process id such as p1)", a.ID != ""); m != "" {
			return m
		}
		return need("text (what to send; end with \\n for Enter)", a.Text != nil)
	case "signal":
		if m := need("id (a process id such as p1)", a.ID != ""); m != "" {
			return m
		}
		return need("signal (TERM, INT, HUP, QUIT, USR1, USR2 or KILL)", a.Signal != "")
	}
	return fmt.Sprintf("action %q is not one of start, list, output, input, signal, wait", a.Action)
}

// firstSecond is how long start waits for a process's first words.
const firstSecond = time.Second

func (t *processTool) start(ctx context.Context, env *tools.Env, conn *tools.SandboxConn, a processArgs) (tools.Result, error) {
	dir, msg, err := execDir(ctx, env, conn, a.Workdir)
	if msg != "" || err != nil {
		return tools.Error(msg), err
	}
	labels := map[string]string{"started_by": "process tool"}
	if env.Run != nil && env.Run.ID != "" {
		labels["run"] = env.Run.ID
	}
	p, err := conn.Agent.ProcStart(ctx, &proto.ProcStartRequest{
		Argv: ShellArgv(a.Command), Dir: dir, Env: a.Env,
		Labels: labels, Pty: a.Pty, RingBytes: t.c.procRing, MaxLive: t.c.procMax,
	})
	if err != nil {
		return fail(err)
	}
	if q, err := conn.Agent.ProcGet(ctx, p.ID, firstSecond); err == nil {
		p = q
	}
	out, err := conn.Agent.ProcOutput(ctx, &proto.ProcOutputRequest{ID: p.ID, MaxBytes: t.c.shellOutput})
	if err != nil {
		return fail(err)
	}
	t.setCursor(env, conn, p.ID, out.Next)
	var b strings.Builder
	fmt.Fprintf(&b, "started %s (pid %d): %s\n", p.ID, p.PID, a.Command)
	if out.Process.State == proto.ProcRunning {
		fmt.Fprintf(&b, "state: running\n")
	} else {
		fmt.Fprintf(&b, "state: %s within its first second\n", StateText(out.Process))
	}
	writeOutput(&b, "output in its first second", out, t.c.shellOutput)
	fmt.Fprintf(&b, "next cursor: %d (action output, id %s, reads on from here)", out.Next, p.ID)
	return tools.Text(b.String()), nil
}

func (t *processTool) list(ctx context.Context, conn *tools.SandboxConn) (tools.Result, error) {
	ps, err := conn.Agent.ProcList(ctx, nil)
	if err != nil {
		return fail(err)
	}
	if len(ps) == 0 {
		return tools.Text("no processes: start one with action start"), nil
	}
	var b strings.Builder
	for _, p := range ps {
		term := ""
		if p.Pty != nil {
			term = fmt.Sprintf(" [terminal %dx%d]", p.Pty.Cols, p.Pty.Rows)
		}
		fmt.Fprintf(&b, "%s  %-20s  started %s  output %d bytes%s  %s\n", p.ID, StateText(p), p.StartedAt.UTC().Format(time.RFC3339), p.Output, term, CommandLine(p))
	}
	return tools.Text(strings.TrimRight(b.String(), "\n")), nil
}

func (t *processTool) output(ctx context.Context, env *tools.Env, conn *tools.SandboxConn, a processArgs) (tools.Result, error) {
	since, remembered := int64(0), false
	if a.Since != nil {
		since = *a.Since
	} else {
		since, remembered = t.cursor(env, conn, a.ID)
	}
	out, err := conn.Agent.ProcOutput(ctx, &proto.ProcOutputRequest{ID: a.ID, Since: since, MaxBytes: 4 * t.c.shellOutput})
	if err != nil {
		return fail(err)
	}
	t.setCursor(env, conn, a.ID, out.Next)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", a.ID, StateText(out.Process))
	from := "since the cursor"
	if a.Since == nil && !remembered {
		from = "from the start"
	} else if a.Since == nil {
		from = "since this run last read it"
	}
	writeOutput(&b, "output "+from, out, t.c.shellOutput)
	more := ""
	if out.Next < out.Process.Output {
		more = fmt.Sprintf("; %d bytes more are there already", out.Process.Output-out.Next)
	}
	fmt.Fprintf(&b, "next cursor: %d%s", out.Next, more)
	return tools.Text(b.String()), nil
}

func (t *processTool) signal(ctx context.Context, conn *tools.SandboxConn, a processArgs) (tools.Result, error) {
	sig := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(a.Signal)), "SIG")
	if sig == "KILL" {
		p, err := conn.Agent.ProcKill(ctx, a.ID)
		if err != nil {
			return fail(err)
		}
		return tools.Text(fmt.Sprintf("%s and every process it started were killed; %s: %s", a.ID, a.ID, StateText(*p))), nil
	}
	if err := conn.Agent.ProcSignal(ctx, a.ID, sig); err != nil {
		return fail(err)
	}
	p, err := conn.Agent.ProcGet(ctx, a.ID, 500*time.Millisecond)
	if err != nil {
		return fail(err)
	}
	return tools.Text(fmt.Sprintf("sent SIG%s to %s and its process group; now %s", sig, a.ID, StateText(*p))), nil
}

func (t *processTool) wait(ctx context.Context, conn *tools.SandboxConn, a processArgs) (tools.Result, error) {
	secs := 30
	if a.TimeoutS != nil {
		secs = *a.TimeoutS
	}
	p, err := conn.Agent.ProcGet(ctx, a.ID, time.Duration(secs)*time.Second)
	if err != nil {
		return fail(err)
	}
	if p.State == proto.ProcRunning {
		return tools.Text(fmt.Sprintf("%s is still running after %d s", a.ID, secs)), nil
	}
	return tools.Text(fmt.Sprintf("%s: %s", a.ID, StateText(*p))), nil
}

// StateText says how a process stands: running, exited N, killed by SIGX
// (by the OOM killer), stopped by hibernation (the sandbox slept: the
// process has no status of its own). Nothing is made up: an unknown end
// says so.
func StateText(p proto.ProcInfo) string {
	switch {
	case p.State == proto.ProcRunning:
		return "running"
	case p.Hibernated:
		return "stopped by hibernation"
	case p.ExitCode != nil:
		return fmt.Sprintf("exited %d", *p.ExitCode)
	case p.Signal != "" && p.OOMKilled:
		return "killed by SIG" + p.Signal + " (the out-of-memory killer)"
	case p.Signal != "":
		return "killed by SIG" + p.Signal
	}
	return "ended (its status is not known)"
}

// ShellArgv runs a command line as shell does: bash where the sandbox has
// it, else sh, the line passed as an argument so it is never re-quoted.
func ShellArgv(command string) []string {
	return []string{"/bin/sh", "-c", shellScript, "sh", command}
}

// CommandLine is the command line a process was started with: the shell
// line for one started with ShellArgv, else its argv joined.
func CommandLine(p proto.ProcInfo) string {
	if len(p.Argv) == 5 && p.Argv[2] == shellScript {
		return p.Argv[4]
	}
	return strings.Join(p.Argv, " ")
}

// writeOutput renders an output response: the bytes missed, then the
// chunks' text with the head and the tail kept past capBytes.
func writeOutput(b *strings.Builder, title string, out *proto.ProcOutputResponse, capBytes int) {
	if out.Dropped > 0 {
		fmt.Fprintf(b, "(%d bytes were lost before this: the process printed more than its output buffer keeps)\n", out.Dropped)
	}
	var all []byte
	for _, c := range out.Chunks {
		all = append(all, c.Data...)
	}
	if len(all) == 0 {
		fmt.Fprintf(b, "--- %s: (none)\n", title)
		return
	}
	text := string(all)
	if len(all) > capBytes {
		head, tail := headCut(all[:capBytes/2]), tailCut(all[len(all)-capBytes/2:])
		text = string(head) + fmt.Sprintf("\n... %d bytes not shown ...\n", len(all)-len(head)-len(tail)) + string(tail)
	}
	fmt.Fprintf(b, "--- %s ---\n%s", title, strings.ToValidUTF8(text, "\uFFFD"))
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
}

// headCut drops a rune cut at the end; tailCut one cut at the start.
func headCut(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

func tailCut(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return b
}

func (t *processTool) key(env *tools.Env, conn *tools.SandboxConn, id string) cursorKey {
	run := ""
	if env.Run != nil {
		run = env.Run.ID
	}
	return cursorKey{run: run, sandbox: conn.ID, proc: id}
}

func (t *processTool) cursor(env *tools.Env, conn *tools.SandboxConn, id string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.cursors[t.key(env, conn, id)]
	return n, ok
}

func (t *processTool) setCursor(env *tools.Env, conn *tools.SandboxConn, id string, next int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cursors == nil || len(t.cursors) >= maxCursors {
		t.cursors = map[cursorKey]int64{}
	}
	t.cursors[t.key(env, conn, id)] = next
}

// forgetRun drops the cursors of a run that ended.
func (t *processTool) forgetRun(run string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cursors {
		if k.run == run {
			delete(t.cursors, k)
		}
	}
}
