package eval_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/tools"
)

func TestHost(t *testing.T)   { suite(t, hostBox(t)) }
func TestDocker(t *testing.T) { suite(t, dockerBox(t)) }

// suite runs every case in one box, one after the other (a sandbox has one
// kernel per language); each case starts from a reset kernel.
func suite(t *testing.T, b *box) {
	cases := []struct {
		name string
		fn   func(t *testing.T, b *box)
	}{
		{"python/state_and_last_expression", pyState},
		{"python/print_display_order", pyOrder},
		{"python/indented_cell_and_syntax_error", pyIndented},
		{"python/dataframe_table", pyDataFrame},
		{"python/matplotlib_png", pyPlot},
		{"python/magics", pyMagics},
		{"python/pip_install_local_wheel", pyPip},
		{"python/input_fails", pyInput},
		{"python/budget_interrupts_loop_state_kept", pyBudget},
		{"python/tool_bridge", pyBridge},
		{"python/bridge_call_longer_than_budget", pySlowBridge},
		{"python/sigkill_reported_not_rerun", func(t *testing.T, b *box) { killed(t, b, "python") }},
		{"python/crash_reports_last_output", pyCrash},
		{"python/reset", pyReset},
		{"python/output_capped", func(t *testing.T, b *box) { capped(t, b, "python", `print("x" * 1_000_000); print("END")`) }},
		{"python/ipython_display", pyIPythonDisplay},
		{"python/ipython_display_stand_in", pyIPythonStandIn},
		{"python/repr_methods", pyReprs},
		{"python/pil_images", pyPIL},
		{"python/tracebacks_user_frames_only", pyTracebacks},
		{"python/execution_count", func(t *testing.T, b *box) { execCount(t, b, "python") }},
		{"python/chart_as_data", pyChartData},
		{"python/reconnect_keeps_state", func(t *testing.T, b *box) { reconnect(t, b, "python", "kept = 'still here'", "kept") }},
		{"javascript/state_redeclare_await", jsState},
		{"javascript/print_display_order", jsOrder},
		{"javascript/stderr_order", jsStderrOrder},
		{"javascript/require_and_import_from_workdir", jsRequire},
		{"javascript/budget_interrupts_loop_state_kept", jsBudget},
		{"javascript/tool_bridge", jsBridge},
		{"javascript/sigkill_reported_not_rerun", func(t *testing.T, b *box) { killed(t, b, "javascript") }},
		{"javascript/reset", jsReset},
		{"javascript/output_capped", func(t *testing.T, b *box) {
			capped(t, b, "javascript", `console.log("x".repeat(1000000)); console.log("END")`)
		}},
		{"javascript/static_imports", jsStaticImports},
		{"javascript/tracebacks_user_frames_only", jsTracebacks},
		{"javascript/execution_count", func(t *testing.T, b *box) { execCount(t, b, "javascript") }},
		{"javascript/reconnect_keeps_state", func(t *testing.T, b *box) { reconnect(t, b, "javascript", "let kept = 'still here'", "kept") }},
	}
	for _, c := range cases {
		ok := t.Run(c.name, func(t *testing.T) {
			b.t = t
			lang := strings.SplitN(c.name, "/", 2)[0]
			b.reset(lang)
			c.fn(t, b)
		})
		if !ok && b.name == "docker" && t.Failed() && strings.Contains(c.name, "state_and_last") {
			t.FailNow() // nothing else can work
		}
	}
}

func want(t *testing.T, got, sub string) {
	t.Helper()
	if !strings.Contains(got, sub) {
		t.Fatalf("output %q does not contain %q", got, sub)
	}
}

func pyState(t *testing.T, b *box) {
	b.ok("python", "x = 41\nimport math")
	if got := b.ok("python", "x + 1"); got != "42" {
		t.Fatalf("last expression = %q, want 42", got)
	}
	if got := b.ok("python", "x + 1;"); got != "" {
		t.Fatalf("a cell ending in ';' showed %q", got)
	}
	if got := b.ok("python", "y = math.floor(2.5)  # comment\ny"); got != "2" {
		t.Fatalf("got %q", got)
	}
	if got := b.ok("python", "None"); got != "" {
		t.Fatalf("None was shown: %q", got)
	}
	if got := b.ok("python", "import asyncio\nawait asyncio.sleep(0.01)\nx * 2"); got != "82" {
		t.Fatalf("top-level await: %q", got)
	}
	b.fail("python", "1/0", "ZeroDivisionError", nil)
	if got := b.ok("python", "x"); got != "41" {
		t.Fatalf("state after an error: %q", got)
	}
}

// pyIndented: a cell pasted from a function body runs as written, and a cell
// that does not parse is reported at its own line, not the parser's frames.
func pyIndented(t *testing.T, b *box) {
	if got := b.ok("python", "    a = 2\n    if a:\n        a += 1\n    a"); got != "3" {
		t.Fatalf("an indented cell gave %q, want 3", got)
	}
	out := b.fail("python", "x = (1,", "SyntaxError", nil)
	for _, internal := range []string{"ast.py", "kernel.py", "Traceback"} {
		if strings.Contains(out, internal) {
			t.Fatalf("a syntax error shows the kernel's internals (%s): %q", internal, out)
		}
	}
	if !strings.Contains(out, "<cell-") {
		t.Fatalf("a syntax error does not name the cell: %q", out)
	}
}

func pyOrder(t *testing.T, b *box) {
	r := b.evalIn(b.env, "python", `print("one"); display({"two": 2}); print("three")`+"\n"+`"four"`, nil)
	if r.IsError {
		t.Fatal(text(r))
	}
	var got []string
	for _, bl := range r.Content[1:] {
		got = append(got, strings.TrimSpace(bl.Text))
	}
	if strings.Join(got, "|") != "one|{'two': 2}|three|'four'" {
		t.Fatalf("blocks in order %q", got)
	}
	if r.Content[0].Text != "[1] test cell for the eval suite" {
		t.Fatalf("first block %q is not the description", r.Content[0].Text)
	}
}

func pyDataFrame(t *testing.T, b *box) {
	if !b.scientific {
		t.Skip("this machine's python3 has no pandas/matplotlib (the sandbox image has them)")
	}
	got := b.ok("python", "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Rome'], 'temp': [3, 18]})\ndf")
	// A markdown table, with or without tabulate installed.
	norm := strings.Join(strings.Fields(got), " ")
	for _, s := range []string{"| city | temp |", "| 0 | Oslo | 3 |", "| 1 | Rome | 18 |"} {
		want(t, norm, s)
	}
	big := b.ok("python", "pd.DataFrame({'n': range(1000)})")
	want(t, big, "[1000 rows x 1 columns; first 60 shown]")
}

func pyPlot(t *testing.T, b *box) {
	if !b.scientific {
		t.Skip("this machine's python3 has no pandas/matplotlib (the sandbox image has them)")
	}
	r := b.evalIn(b.env, "python", "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2, 3], [1, 4, 9])\nprint('plotted')", nil)
	if r.IsError {
		t.Fatal(text(r))
	}
	var imgs []tools.Block
	for _, bl := range r.Content {
		if bl.Type == "image" {
			imgs = append(imgs, bl)
		}
	}
	if len(imgs) != 1 || imgs[0].MimeType != "image/png" {
		t.Fatalf("want one PNG block, got %+v", r.Content)
	}
	raw, err := base64.StdEncoding.DecodeString(imgs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w < 100 || w > 220 || h < 75 || h > 170 {
		t.Fatalf("figure is %dx%d, want about 200x150 (4x3 in at 50 dpi, tight box)", w, h)
	}
	// The figure was closed after the cell: the next cell shows no image.
	r = b.evalIn(b.env, "python", "len(plt.get_fignums())", nil)
	if text(r) != "0" || len(r.Content) != 2 {
		t.Fatalf("figures left open: %+v", r.Content)
	}
	// show() emits at once (the image, then its chart text).
	r = b.evalIn(b.env, "python", "plt.plot([1, 2]); plt.show(); print('after')", nil)
	if len(r.Content) != 4 || r.Content[1].Type != "image" || !strings.HasPrefix(r.Content[2].Text, "[chart]") || !strings.Contains(r.Content[3].Text, "after") {
		t.Fatalf("show(): %+v", r.Content)
	}
}

func pyMagics(t *testing.T, b *box) {
	b.ok("python", "name = 'magic'")
	want(t, b.ok("python", "!echo hello $name {1+1}"), "hello magic 2")
	if got := b.ok("python", "files = !printf 'a\\nb\\n'\nfiles"); got != "['a', 'b']" {
		t.Fatalf("x = !cmd gave %q", got)
	}
	want(t, b.ok("python", "%%bash\necho from bash\necho $((6*7))"), "from bash\n42")
	want(t, b.ok("python", "%%sh\necho from sh"), "from sh")
	b.ok("python", "%%writefile notes.txt\nline one")
	if !b.exists("notes.txt") {
		t.Fatal("%%writefile wrote nothing in the workdir")
	}
	want(t, b.ok("python", "print(open('notes.txt').read())"), "line one")
	want(t, b.ok("python", "%timeit sum(range(10))"), "per loop")
	want(t, b.ok("python", "%%timeit\nsum(range(10))"), "per loop")
	want(t, b.ok("python", "%time z = sum(range(100))\nz"), "Wall time")
	want(t, b.ok("python", "%%time\nw = 5"), "CPU times")
	b.ok("python", "%env GREETING=hi")
	want(t, b.ok("python", "import os\nos.environ['GREETING']"), "'hi'")
	b.ok("python", "%matplotlib inline")
	b.ok("python", "import os\nos.makedirs('sub', exist_ok=True)")
	want(t, b.ok("python", "%cd sub"), "/sub")
	want(t, b.ok("python", "os.getcwd()"), "/sub")
	b.ok("python", "%cd ..")
	b.fail("python", "%nosuchmagic 1", "%nosuchmagic is not a magic eval knows", nil)
	// Valid Python is never rewritten, even where a line starts with '%'.
	if got := b.ok("python", "a = (10\n% 3)\na"); got != "1" {
		t.Fatalf("valid code was changed: %q", got)
	}
}

// wheel builds a pure-Python wheel of package sbdpkg at version.
func wheel(t *testing.T, version string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	info := "sbdpkg-" + version + ".dist-info/"
	files := []struct{ name, body string }{
		{"sbdpkg/__init__.py", fmt.Sprintf("VERSION = %q\n", version)},
		{info + "METADATA", "Metadata-Version: 2.1\nName: sbdpkg\nVersion: " + version + "\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: eval-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{info + "top_level.txt", "sbdpkg\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(info + "RECORD,,\n")
	w, _ := zw.Create(info + "RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func pyPip(t *testing.T, b *box) {
	b.writeFile("dist/sbdpkg-0.1-py3-none-any.whl", wheel(t, "0.1"))
	b.writeFile("dist/sbdpkg-0.2-py3-none-any.whl", wheel(t, "0.2"))
	t.Cleanup(func() { b.evalIn(b.env, "python", "%pip uninstall -y sbdpkg", nil) })
	b.fail("python", "import sbdpkg", "No module named 'sbdpkg'", nil)
	want(t, b.ok("python", "%pip install --no-index dist/sbdpkg-0.1-py3-none-any.whl"), "Successfully installed sbdpkg-0.1")
	if got := b.ok("python", "import sbdpkg\nsbdpkg.VERSION"); got != "'0.1'" {
		t.Fatalf("after install: %q", got)
	}
	// An upgrade purges the old module, so the next import sees the new one.
	b.ok("python", "%pip install --no-index --upgrade dist/sbdpkg-0.2-py3-none-any.whl")
	if got := b.ok("python", "import sbdpkg\nsbdpkg.VERSION"); got != "'0.2'" {
		t.Fatalf("after upgrade: %q", got)
	}
}

func pyInput(t *testing.T, b *box) {
	start := time.Now()
	b.fail("python", "name = input('your name? ')", "input() is not available in eval", nil)
	b.fail("python", "import sys\nsys.stdin.readline()", "input() is not available in eval", nil)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("input() took %s to fail", d)
	}
}

func pyBudget(t *testing.T, b *box) {
	b.ok("python", "keep = 'me'\nn = 0")
	msg := b.fail("python", "while True:\n    n += 1", "ran past its budget", map[string]any{"timeout_s": 1})
	want(t, msg, "KeyboardInterrupt")
	if got := b.ok("python", "keep, n > 0"); got != "('me', True)" {
		t.Fatalf("state after the interrupt: %q", got)
	}
	// A blocking call is interrupted too.
	b.fail("python", "import time\ntime.sleep(60)", "ran past its budget", map[string]any{"timeout_s": 1})
	if got := b.ok("python", "keep"); got != "'me'" {
		t.Fatalf("state after the interrupt: %q", got)
	}
}

func pyBridge(t *testing.T, b *box) {
	b.writeFile("lib/auth.txt", []byte("secret = 42\n"))
	got := b.ok("python", "contents = tool('read', {'path': 'lib/auth.txt'})\nprint(contents)")
	want(t, got, "secret = 42")
	msg := b.fail("python", "tool('read', {'path': 'nope.txt'})", "ToolError", nil)
	want(t, msg, "nope.txt")
	// A write from a default run goes through (and its own queue).
	b.ok("python", "tool('write', {'path': 'made.txt', 'content': 'hi\\n'})")
	if !b.exists("made.txt") {
		t.Fatal("tool('write') wrote nothing")
	}
	// A plan run cannot write: the tool is hidden from it, from a cell too.
	// (A plan run cannot see eval itself, so the tool is called directly.)
	plan := b.envFor(tools.SurfacePlan)
	res, err := b.tool.Call(b.ctx(), plan, []byte(`{"code": "tool('write', {'path': 'plan.txt', 'content': 'x'})", "description": "try a write from a plan run"}`))
	if err != nil || !res.IsError || !strings.Contains(text(res), `tool "write" is not available to this run`) {
		t.Fatalf("plan write: %v %+v", err, res)
	}
	if b.exists("plan.txt") {
		t.Fatal("a plan run wrote a file through the bridge")
	}
	want(t, b.okEnv(plan, "python", "tool('read', {'path': 'lib/auth.txt'})"), "secret")
	// Approvals apply to calls from a cell as to the model's own.
	ask := b.envFor(tools.SurfaceDefault)
	ask.Run.Approval = "ask"
	res, err = b.tool.Call(b.ctx(), ask, []byte(`{"code": "tool('write', {'path': 'asked.txt', 'content': 'x'})", "description": "try a write needing approval"}`))
	if err != nil || !res.IsError || !strings.Contains(text(res), "denied by the user: the write call was not run") || b.exists("asked.txt") {
		t.Fatalf("write needing approval: %v %+v", err, res)
	}
}

func (b *box) okEnv(env *tools.Env, lang, code string) string {
	b.t.Helper()
	res, err := b.tool.Call(b.ctx(), env, []byte(fmt.Sprintf(`{"code": %q, "description": "a cell", "language": %q}`, code, lang)))
	if err != nil || res.IsError {
		b.t.Fatalf("%q: %v %s", code, err, text(res))
	}
	return text(res)
}

func pySlowBridge(t *testing.T, b *box) {
	// The slow tool takes 3 s; the budget is 1 s of the cell's own time.
	got := b.evalIn(b.env, "python", "r = tool('slow', {})\nr", map[string]any{"timeout_s": 1})
	if got.IsError || text(got) != "'slow done'" {
		t.Fatalf("a bridge call longer than the budget: %+v", got)
	}
}

func killed(t *testing.T, b *box, lang string) {
	set := map[string]string{"python": "doomed = 1", "javascript": "var doomed = 1"}[lang]
	b.ok(lang, set)
	p := b.kernelProc(lang)
	c, _ := b.conn(b.ctx())
	if err := c.Signal(b.ctx(), &proto.SignalRequest{ID: p.ID, Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(b.ctx(), &proto.WaitRequest{ID: p.ID, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	marker := map[string]string{
		"python":     "open('rerun.txt', 'w').write('ran')",
		"javascript": "require('fs').writeFileSync('rerun.txt', 'ran')",
	}[lang]
	msg := b.fail(lang, marker, "kernel died: killed by signal KILL; its state is lost; a new kernel is ready", nil)
	want(t, msg, "This cell was not run")
	if b.exists("rerun.txt") {
		t.Fatal("the cell ran after the kernel died")
	}
	b.fail(lang, "doomed", "doomed", nil) // the new kernel has no state
	if q := b.kernelProc(lang); q.ID == p.ID {
		t.Fatal("no new kernel")
	}
}

func pyReset(t *testing.T, b *box) {
	b.ok("python", "before_reset = 1")
	r := b.evalIn(b.env, "python", "'before_reset' in globals()", map[string]any{"reset": true})
	if r.IsError || text(r) != "False" {
		t.Fatalf("reset kept state: %+v", r)
	}
}

func capped(t *testing.T, b *box, lang, code string) {
	got := b.ok(lang, code)
	if len(got) > 80<<10 {
		t.Fatalf("output is %d bytes; want it capped near 64 KiB", len(got))
	}
	want(t, got, "bytes of stdout omitted")
	if !strings.HasPrefix(got, "xxxx") || !strings.HasSuffix(strings.TrimSpace(got), "END") {
		t.Fatalf("head or tail lost: %q ... %q", got[:20], got[len(got)-20:])
	}
}

func reconnect(t *testing.T, b *box, lang, set, get string) {
	b.ok(lang, set)
	before := b.kernelProc(lang)
	b.reconnect()
	b.newTool() // a new sandboxd: no memory of the kernel
	want(t, b.ok(lang, get), "still here")
	if after := b.kernelProc(lang); after.ID != before.ID {
		t.Fatalf("a new kernel was started (%s, was %s)", after.ID, before.ID)
	}
}

func jsState(t *testing.T, b *box) {
	b.ok("javascript", "let x = 41")
	if got := b.ok("javascript", "x + 1"); got != "42" {
		t.Fatalf("completion value %q", got)
	}
	if got := b.ok("javascript", "let x = 1; const k = 2; class A {}; x + k"); got != "3" {
		t.Fatalf("re-declaration: %q", got)
	}
	if got := b.ok("javascript", "const k = 5; class A { f() { return 9 } }; new A().f() + k"); got != "14" {
		t.Fatalf("re-declared const/class: %q", got)
	}
	if got := b.ok("javascript", "const v = await new Promise(r => setTimeout(() => r(7), 10)); v * 2"); got != "14" {
		t.Fatalf("top-level await: %q", got)
	}
	if got := b.ok("javascript", "({a: 1, s: 'two'})"); got != "{ a: 1, s: 'two' }" {
		t.Fatalf("object: %q", got)
	}
	msg := b.fail("javascript", "throw new Error('boom')", "Error: boom", nil)
	if strings.Contains(msg, "kernel.js") {
		t.Fatalf("the kernel's own frames leak into the error: %q", msg)
	}
	b.fail("javascript", "input()", "input is not available in eval", nil)
	if got := b.ok("javascript", "x"); got != "1" {
		t.Fatalf("state: %q", got)
	}
}

func jsOrder(t *testing.T, b *box) {
	r := b.evalIn(b.env, "javascript", `console.log("one"); display({two: 2}); console.log("three"); "four"`, nil)
	var got []string
	for _, bl := range r.Content[1:] {
		got = append(got, strings.TrimSpace(bl.Text))
	}
	if r.IsError || strings.Join(got, "|") != "one|{ two: 2 }|three|'four'" {
		t.Fatalf("blocks in order %q (%v)", got, r.IsError)
	}
}

// stderr keeps its place between the stdout lines written around it, in
// its own marked block.
func jsStderrOrder(t *testing.T, b *box) {
	r := b.evalIn(b.env, "javascript", `console.log("one"); console.error("two"); console.log("three")`, nil)
	var got []string
	for _, bl := range r.Content[1:] {
		got = append(got, strings.Join(strings.Fields(bl.Text), " "))
	}
	if r.IsError || strings.Join(got, "|") != "one|[stderr] two|three" {
		t.Fatalf("blocks in order %q (%v)", got, r.IsError)
	}
}

func jsRequire(t *testing.T, b *box) {
	b.writeFile("mod/util.js", []byte("module.exports = { answer: 42 };\n"))
	if got := b.ok("javascript", "require('./mod/util.js').answer"); got != "42" {
		t.Fatalf("require: %q", got)
	}
	if got := b.ok("javascript", "(await import('./mod/util.js')).default.answer"); got != "42" {
		t.Fatalf("import(): %q", got)
	}
	if got := b.ok("javascript", "require('path').basename(process.cwd()) === require('path').basename("+fmt.Sprintf("%q", b.ws)+")"); got != "true" {
		t.Fatalf("cwd: %q", got)
	}
}

func jsBudget(t *testing.T, b *box) {
	b.ok("javascript", "var keep = 'me'; var n = 0")
	b.fail("javascript", "while (true) { n++ }", "ran past its budget", map[string]any{"timeout_s": 1})
	if got := b.ok("javascript", "[keep, n > 0]"); got != "[ 'me', true ]" {
		t.Fatalf("state after the interrupt: %q", got)
	}
	b.fail("javascript", "await new Promise(() => {})", "ran past its budget", map[string]any{"timeout_s": 1})
	if got := b.ok("javascript", "keep"); got != "'me'" {
		t.Fatalf("state after the interrupt: %q", got)
	}
}

func jsBridge(t *testing.T, b *box) {
	b.writeFile("lib/auth.txt", []byte("secret = 42\n"))
	want(t, b.ok("javascript", "const c = await tool('read', {path: 'lib/auth.txt'}); console.log(c)"), "secret = 42")
	b.fail("javascript", "await tool('read', {path: 'nope.txt'})", "ToolError", nil)
	if got := b.evalIn(b.env, "javascript", "await tool('slow', {})", map[string]any{"timeout_s": 1}); got.IsError || text(got) != "'slow done'" {
		t.Fatalf("slow bridge call: %+v", got)
	}
}

func jsReset(t *testing.T, b *box) {
	b.ok("javascript", "var beforeReset = 1")
	r := b.evalIn(b.env, "javascript", "typeof beforeReset", map[string]any{"reset": true})
	if r.IsError || text(r) != "'undefined'" {
		t.Fatalf("reset kept state: %+v", r)
	}
}

func pyCrash(t *testing.T, b *box) {
	// Output of subprocesses and of C code lands in the cell, in order,
	// stderr marked as such.
	got := b.ok("python", "import os, subprocess\nprint('before')\nos.system('echo from-system')\nsubprocess.run(['sh', '-c', 'echo from-run >&2'])\nprint('after')")
	if strings.Join(strings.Fields(got), " ") != "before from-system [stderr] from-run after" {
		t.Fatalf("fd-level output out of order: %q", got)
	}
	msg := b.fail("python", "import ctypes\nctypes.string_at(0)", "kernel died: killed by signal SEGV", nil)
	want(t, msg, "It died while running this cell")
	want(t, msg, "Fatal Python error: Segmentation fault")
	if got := b.ok("python", "1+1"); got != "2" {
		t.Fatalf("the new kernel: %q", got)
	}
}
