package debug

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	godap "github.com/google/go-dap"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Caps on what one result shows (DESIGN.md §4 debug).
const (
	maxFrames    = 30
	maxChildren  = 50
	maxValue     = 400
	maxSourceLen = 200
	maxFileRead  = 4 << 20
)

// describe says what the session is doing now: where it stopped, that it
// runs, or how it ended.
func (c *call) describe(ctx context.Context, s *session) string {
	s.recordStop(ctx)
	st := s.state()
	var b strings.Builder
	switch {
	case st.stop != nil:
		b.WriteString(c.describeStop(ctx, s, st.stop))
	case st.ended || st.exitCode != nil:
		if st.exitCode != nil {
			fmt.Fprintf(&b, "The program exited with code %d.", *st.exitCode)
		} else {
			fmt.Fprintf(&b, "The session ended: %s.", st.endReason)
		}
		b.WriteString(" Call output to read what it printed, then terminate (or launch again).")
	default:
		b.WriteString("Running: no stop yet. Call status or output later, or pause to stop it.")
	}
	if n := s.pendingOutput(); n > 0 {
		fmt.Fprintf(&b, "\n(%d bytes of new program output; call output to read them.)", n)
	}
	return b.String()
}

func (c *call) describeStop(ctx context.Context, s *session, stop *godap.StoppedEventBody) string {
	stop = c.focus(ctx, s, stop)
	var b strings.Builder
	fmt.Fprintf(&b, "Stopped: %s", stop.Reason)
	if stop.Description != "" && stop.Description != stop.Reason && !strings.EqualFold(stop.Description, "paused on "+stop.Reason) {
		fmt.Fprintf(&b, " (%s)", oneLine(stop.Description))
	}
	if stop.Text != "" {
		fmt.Fprintf(&b, " — %s", capValue(oneLine(stop.Text)))
	}
	if stop.ThreadId != 0 {
		fmt.Fprintf(&b, ", thread %d", stop.ThreadId)
	}
	// A panic or an exception is raised deep in the runtime or a library,
	// and a pause may catch a thread in the runtime (a Go program in its
	// signal trampoline); the line that matters is the first in the
	// user's code.
	toUser := isFault(stop) || stop.Reason == "pause"
	levels := 1
	if toUser {
		levels = maxFrames
	}
	frames, _, err := c.frames(ctx, s, stop.ThreadId, levels)
	if err != nil || len(frames) == 0 {
		b.WriteString(".\n(where: unknown — call stack)")
		return b.String()
	}
	b.WriteString("\n")
	src := newSourceCache(c, s)
	top := 0
	if toUser {
		for i, f := range frames {
			if inProject(f, c.workspace()) {
				top = i
				break
			}
		}
	}
	b.WriteString(c.frameLine(ctx, src, top, frames[top]))
	if top > 0 {
		names := make([]string, top)
		for i, f := range frames[:top] {
			names[i] = oneLine(f.Name)
			if where, ok := c.noSource(ctx, src, f); ok {
				names[i] += " (" + where + ")"
			}
		}
		verb := "raised"
		if !isFault(stop) {
			verb = "stopped"
		}
		fmt.Fprintf(&b, "\n(%s below, outside the workspace: %s; stack shows those frames)", verb, capText(strings.Join(names, " <- "), maxSourceLen))
	}
	b.WriteString("\nUse frame_id with scopes or evaluate; stack shows the callers.")
	return b.String()
}

// frameLine renders one frame: "#0 [frame N] function at file:line" and the
// source line below it. A frame without a source file (lldb gives some a
// source named after the function, for disassembly) is always
// "function (module, no source)"; a source with only a name of its own
// (Python's <string>) keeps "at name:line".
func (c *call) frameLine(ctx context.Context, src *sourceCache, i int, f godap.StackFrame) string {
	if where, ok := c.noSource(ctx, src, f); ok {
		return fmt.Sprintf("#%d [frame %d] %s (%s)", i, f.Id, f.Name, where)
	}
	file := f.Source.Path
	if file == "" {
		file = f.Source.Name
	}
	line := fmt.Sprintf("#%d [frame %d] %s at %s:%d", i, f.Id, f.Name, c.rel(file), f.Line)
	if f.Source.Path != "" && f.Line > 0 {
		if text, ok := src.line(ctx, f.Source.Path, f.Line); ok {
			line += fmt.Sprintf("\n    %d | %s", f.Line, text)
		}
	}
	return line
}

// noSource tells, for a frame without a source file, what frameLine puts
// in place of its position: "module, no source", or "no source".
func (c *call) noSource(ctx context.Context, src *sourceCache, f godap.StackFrame) (string, bool) {
	if f.Source != nil && (f.Source.Path != "" || f.Source.Name != "" && f.Source.Name != f.Name) {
		return "", false
	}
	if m := c.moduleOf(ctx, src.s, f, &src.askedModules); m != "" {
		return m + ", no source", true
	}
	return "no source", true
}

func (c *call) describeStack(ctx context.Context, s *session, tid int, frames []godap.StackFrame, total int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Stack of thread %d:\n", tid)
	src := newSourceCache(c, s)
	for i, f := range frames {
		b.WriteString(c.frameLine(ctx, src, i, f))
		b.WriteByte('\n')
	}
	if total > len(frames) {
		fmt.Fprintf(&b, "... %d more frames not shown (cap %d)\n", total-len(frames), maxFrames)
	}
	return strings.TrimRight(b.String(), "\n")
}

func describeThreads(threads []godap.Thread, stop *godap.StoppedEventBody) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d thread(s):\n", len(threads))
	for i, t := range threads {
		if i == 100 {
			fmt.Fprintf(&b, "... %d more threads\n", len(threads)-i)
			break
		}
		mark := ""
		if stop != nil && stop.ThreadId == t.Id {
			mark = "  <- stopped here (" + stop.Reason + ")"
		}
		fmt.Fprintf(&b, "- %d %s%s\n", t.Id, oneLine(t.Name), mark)
	}
	return strings.TrimRight(b.String(), "\n")
}

func describeScopes(frame int, scopes []godap.Scope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scopes of frame %d (pass reference to variables):\n", frame)
	for _, sc := range scopes {
		extra := ""
		if n := sc.NamedVariables + sc.IndexedVariables; n > 0 {
			extra = fmt.Sprintf(", %d variables", n)
		}
		if sc.Expensive {
			extra += ", expensive"
		}
		fmt.Fprintf(&b, "- %s [reference %d%s]\n", sc.Name, sc.VariablesReference, extra)
	}
	return strings.TrimRight(b.String(), "\n")
}

func describeVariables(ref int, vars []godap.Variable) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Variables of reference %d (%d):\n", ref, len(vars))
	for i, v := range vars {
		if i == maxChildren {
			fmt.Fprintf(&b, "... %d more not shown (cap %d)\n", len(vars)-maxChildren, maxChildren)
			break
		}
		b.WriteString("- " + variableLine(v.Name, v.Type, v.Value, v.VariablesReference) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func variableLine(name, typ, value string, ref int) string {
	s := name
	if typ != "" {
		s += " (" + typ + ")"
	}
	s += " = " + capValue(value)
	if ref > 0 {
		s += fmt.Sprintf(" [ref %d]", ref)
	}
	return s
}

func describeValue(expr, typ, value string, ref int) string {
	return variableLine(expr, typ, value, ref)
}

func describeBreakpoints(file string, lines []int, bps []godap.Breakpoint) string {
	if len(lines) == 0 {
		return "Cleared the breakpoints of " + file + "."
	}
	var ok, bad []string
	for i, bp := range bps {
		want := 0
		if i < len(lines) {
			want = lines[i]
		}
		switch {
		case bp.Verified && bp.Line != 0 && bp.Line != want:
			ok = append(ok, fmt.Sprintf("%d (moved to %d)", want, bp.Line))
		case bp.Verified:
			ok = append(ok, strconv.Itoa(want))
		default:
			msg := "not placed"
			if bp.Message != "" {
				msg = oneLine(bp.Message)
			}
			bad = append(bad, fmt.Sprintf("%d (%s)", want, msg))
		}
	}
	s := fmt.Sprintf("Breakpoints in %s:", file)
	if len(ok) > 0 {
		s += " set at " + strings.Join(ok, ", ") + "."
	}
	if len(bad) > 0 {
		s += " Unverified: " + strings.Join(bad, ", ") + " (they bind once the code loads, or pick another line)."
	}
	return s
}

// capValue cuts a value at maxValue characters and says how many more.
func capValue(v string) string { return capText(v, maxValue) }

func capText(v string, n int) string {
	count := utf8.RuneCountInString(v)
	if count <= n {
		return v
	}
	cut := 0
	for i := range v {
		if n == 0 {
			cut = i
			break
		}
		n--
	}
	return v[:cut] + fmt.Sprintf("… (%d more characters)", count-utf8.RuneCountInString(v[:cut]))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

// sourceCache reads source files through the agent, once per call.
type sourceCache struct {
	c            *call
	s            *session
	files        map[string][]string
	askedModules bool // the adapter's modules were asked for in this call
}

func newSourceCache(c *call, s *session) *sourceCache {
	return &sourceCache{c: c, s: s, files: map[string][]string{}}
}

func (sc *sourceCache) line(ctx context.Context, file string, n int) (string, bool) {
	lines, ok := sc.files[file]
	if !ok {
		res, err := sc.c.conn.Agent.ReadFile(ctx, &proto.ReadFileRequest{Root: "/", Path: file, MaxBytes: maxFileRead})
		if err == nil {
			lines = strings.Split(string(res.Data), "\n")
		}
		sc.files[file] = lines
	}
	if n < 1 || n > len(lines) {
		return "", false
	}
	return capText(strings.TrimRight(lines[n-1], "\r"), maxSourceLen), true
}
