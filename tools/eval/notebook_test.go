package eval_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools"
)

// Notebook code as people write it: IPython's display module, PIL images,
// static imports in JavaScript, and errors that show the user's frames only.

func images(r tools.Result) []tools.Block {
	var out []tools.Block
	for _, bl := range r.Content {
		if bl.Type == "image" {
			out = append(out, bl)
		}
	}
	return out
}

func decodePNG(t *testing.T, bl tools.Block) image.Image {
	t.Helper()
	if bl.MimeType != "image/png" {
		t.Fatalf("image block is %s, want image/png", bl.MimeType)
	}
	raw, err := base64.StdEncoding.DecodeString(bl.Data)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return img
}

// tinyPNG is a 3x2 blue PNG, base64.
func tinyPNG(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for x := 0; x < 3; x++ {
		for y := 0; y < 2; y++ {
			img.Set(x, y, color.RGBA{0, 0, 255, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// noInternals fails when an error text shows the kernel's machinery.
func noInternals(t *testing.T, msg string, extra ...string) {
	t.Helper()
	for _, s := range append([]string{"__sandboxd", "sandboxd_magics", "MagicError", "kernel.py", "kernel.js", "ast.py", "node:internal", "importlib"}, extra...) {
		if strings.Contains(msg, s) {
			t.Fatalf("the error shows the kernel's internals (%s): %q", s, msg)
		}
	}
}

func pyIPythonDisplay(t *testing.T, b *box) {
	ipythonDisplayWorks(t, b)
	// A real IPython (here a stand-in earlier on sys.path) is never shadowed.
	b.writeFile("realipy/IPython/__init__.py", []byte("REAL = True\n"))
	if got := b.ok("python", "import sys\nfor m in [m for m in sys.modules if m == 'IPython' or m.startswith('IPython.')]:\n    del sys.modules[m]\nsys.path.insert(0, 'realipy')\nimport IPython\nIPython.REAL"); got != "True" {
		t.Fatalf("an installed IPython was shadowed: %q", got)
	}
}

// hideIPython makes an installed IPython unimportable in the kernel, so the
// stand-in is used, as on a machine without IPython (the sandbox image has
// one, with ipykernel).
const hideIPython = `import sys
_shim = next(f for f in sys.meta_path if type(f).__name__ == 'ShimFinder')
class _HideIPython:
    def find_spec(self, name, path=None, target=None):
        if name == 'IPython' or name.startswith('IPython.'):
            return _shim.find_spec(name, path, target)
        return None
sys.meta_path.insert(0, _HideIPython())
for m in [m for m in sys.modules if m == 'IPython' or m.startswith('IPython.')]:
    del sys.modules[m]
import IPython
getattr(IPython, '__sandboxd_shim__', False)`

// pyIPythonStandIn: the same notebook code where IPython is not installed
// runs on the kernel's stand-in; a reset leaves the kernel as it was.
func pyIPythonStandIn(t *testing.T, b *box) {
	if r := b.evalIn(b.env, "python", hideIPython, map[string]any{"reset": true}); r.IsError || text(r) != "True" {
		t.Fatalf("hiding IPython: %+v", r)
	}
	ipythonDisplayWorks(t, b)
	b.evalIn(b.env, "python", "1", map[string]any{"reset": true})
}

func ipythonDisplayWorks(t *testing.T, b *box) {
	got := b.ok("python", "from IPython.display import display, Markdown\ndisplay(Markdown('**hi**'))")
	if got != "**hi**" {
		t.Fatalf("display(Markdown('**hi**')) showed %q", got)
	}
	want(t, b.ok("python", "from IPython.display import HTML\nHTML('<b>bold</b>')"), "<b>bold</b>")
	want(t, b.ok("python", "from IPython.display import JSON\nJSON({'k': [1, 2]})"), `"k"`)
	r := b.evalIn(b.env, "python", "from IPython.display import Image\nimport base64\nImage(base64.b64decode('"+tinyPNG(t)+"'))", nil)
	if r.IsError || len(images(r)) != 1 {
		t.Fatalf("IPython.display.Image from bytes: %+v", r)
	}
	if img := decodePNG(t, images(r)[0]); img.Bounds().Dx() != 3 {
		t.Fatalf("image is %v, want 3x2", img.Bounds())
	}
	// A file name works as in IPython.
	b.writeFile("pic.png", mustB64(t, tinyPNG(t)))
	if r := b.evalIn(b.env, "python", "from IPython.display import Image, display\ndisplay(Image(filename='pic.png'))", nil); r.IsError || len(images(r)) != 1 {
		t.Fatalf("Image(filename=...): %+v", r)
	}
	b.ok("python", "from IPython.display import clear_output\nclear_output(wait=True)")
	// IPython.display is a module, as older notebooks use it.
	if got := b.ok("python", "from IPython import display\ndisplay.clear_output(wait=True)\ndisplay.display(display.Markdown('*m*'))"); got != "*m*" {
		t.Fatalf("display.display(display.Markdown(...)) showed %q", got)
	}
	if b.scientific {
		// matplotlib asks get_ipython() for its event hooks once IPython is imported.
		r := b.evalIn(b.env, "python", "import IPython\nimport matplotlib.pyplot as plt\nplt.ion()\nplt.plot([1, 2])\nplt.show()", nil)
		if r.IsError || len(images(r)) != 1 {
			t.Fatalf("pyplot after IPython: %+v", r)
		}
	}
	// get_ipython() as exported notebooks call it (a builtin in IPython).
	want(t, b.ok("python", "get_ipython().run_line_magic('env', 'NB_GREETING=hello')\nimport os\nos.environ['NB_GREETING']"), "'hello'")
	want(t, b.ok("python", "get_ipython().system('echo from-system')"), "from-system")
	b.ok("python", "get_ipython().run_line_magic('matplotlib', 'inline')\nget_ipython().events.register('post_execute', lambda: None)")
	if got := b.ok("python", "get_ipython().user_ns is globals()"); got != "True" {
		t.Fatalf("user_ns is not the cell's namespace: %q", got)
	}
}

func mustB64(t *testing.T, s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pyReprs: objects are shown through their _repr_*_ methods as IPython would.
func pyReprs(t *testing.T, b *box) {
	code := "import base64\n" +
		"class Pic:\n    def _repr_png_(self):\n        return base64.b64decode('" + tinyPNG(t) + "')\n" +
		"class Doc:\n    def _repr_markdown_(self):\n        return '# Title'\n" +
		"class Page:\n    def _repr_html_(self):\n        return '<p>page</p>'\n" +
		"class Both:\n    def __repr__(self):\n        return 'Both(1)'\n    def _repr_html_(self):\n        return '<p>both</p>'\n" +
		"class Vec:\n    def _repr_svg_(self):\n        return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n" +
		"class Bundle:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n        return {'text/markdown': '*bundled*', 'text/plain': 'Bundle'}\n"
	b.ok("python", code)
	if r := b.evalIn(b.env, "python", "Pic()", nil); r.IsError || len(images(r)) != 1 {
		t.Fatalf("_repr_png_: %+v", r)
	}
	for cell, wantText := range map[string]string{
		"Doc()": "# Title", "Page()": "<p>page</p>", "Both()": "Both(1)", "Vec()": "<svg", "Bundle()": "*bundled*",
	} {
		if got := b.ok("python", cell); !strings.Contains(got, wantText) {
			t.Fatalf("%s showed %q, want %q", cell, got, wantText)
		}
	}
}

func pyPIL(t *testing.T, b *box) {
	if r := b.evalIn(b.env, "python", "import PIL", nil); r.IsError {
		t.Skip("PIL is not installed for this python3 (the sandbox image has it)")
	}
	r := b.evalIn(b.env, "python", "from PIL import Image\nimg = Image.new('RGB', (10, 10), 'red')\nimg", nil)
	if r.IsError || len(images(r)) != 1 {
		t.Fatalf("a PIL image as the last expression: %+v", r)
	}
	img := decodePNG(t, images(r)[0])
	if img.Bounds().Dx() != 10 || img.Bounds().Dy() != 10 {
		t.Fatalf("image is %v, want 10x10", img.Bounds())
	}
	if cr, cg, cb, _ := img.At(5, 5).RGBA(); cr>>8 != 255 || cg != 0 || cb != 0 {
		t.Fatalf("pixel is %v, want red", img.At(5, 5))
	}
	r = b.evalIn(b.env, "python", "img.show()\nprint('shown')", nil)
	if r.IsError || len(images(r)) != 1 || strings.Contains(text(r), "Image shown") {
		t.Fatalf("Image.show(): %+v", r)
	}
	r = b.evalIn(b.env, "python", "from IPython.display import display\ndisplay(img)\ndisplay(Image.new('L', (4, 4)))", nil)
	if r.IsError || len(images(r)) != 2 {
		t.Fatalf("display(pil_image): %+v", r)
	}
}

func pyTracebacks(t *testing.T, b *box) {
	b.ok("python", "def parse(s):\n    return int(s)\n\ndef load(rows):\n    return [parse(r) for r in rows]")
	msg := b.fail("python", "load(['1', 'x'])", "ValueError: invalid literal for int()", nil)
	for _, s := range []string{`File "<cell-`, "in load", "in parse", "return int(s)"} {
		want(t, msg, s)
	}
	noInternals(t, msg)
	// A magic's failure is said in the user's words, without frames.
	msg = b.fail("python", "%pip install nonexistent-pkg-xyz", "%pip install failed", nil)
	noInternals(t, msg, "Traceback")
	msg = b.fail("python", "%cd /no/such/dir", "No such file or directory", nil)
	want(t, msg, "%cd /no/such/dir")
	noInternals(t, msg)
	msg = b.fail("python", "%%bash\nexit 3", "%%bash: the cell exited with status 3", nil)
	noInternals(t, msg, "Traceback")
	msg = b.fail("python", "tool('read', {'path': 'no-such-file.txt'})", "ToolError", nil)
	noInternals(t, msg)
}

// execCount: each result carries the kernel's count of cells run, failed
// ones included, shown in the header the transcript reads; a reset starts
// again at 1.
func execCount(t *testing.T, b *box, lang string) {
	cells := map[string][3]string{
		"python":     {"1", "1/0", "2"},
		"javascript": {"1", "null.x", "2"},
	}[lang]
	for i, code := range cells {
		r := b.evalIn(b.env, lang, code, nil)
		if r.ExecutionCount != i+1 {
			t.Fatalf("cell %d (%q): execution_count %d", i+1, code, r.ExecutionCount)
		}
		if wantHead := "[" + string(rune('1'+i)) + "] test cell for the eval suite"; r.Content[0].Text != wantHead {
			t.Fatalf("header %q, want %q", r.Content[0].Text, wantHead)
		}
	}
	b.reset(lang)
	if r := b.evalIn(b.env, lang, "1", nil); r.ExecutionCount != 1 {
		t.Fatalf("after a reset: execution_count %d", r.ExecutionCount)
	}
}

func pyChartData(t *testing.T, b *box) {
	if !b.scientific {
		t.Skip("this machine's python3 has no pandas/matplotlib (the sandbox image has them)")
	}
	r := b.evalIn(b.env, "python", "import matplotlib.pyplot as plt\n"+
		"plt.figure(figsize=(4, 3), dpi=50)\n"+
		"plt.plot([1, 2, 3], [1, 4, 9], label='squares')\n"+
		"plt.plot(range(100), [i / 2 for i in range(100)], label='half')\n"+
		"plt.title('Growth'); plt.xlabel('n'); plt.ylabel('value'); plt.legend()\n"+
		"fig, ax = plt.subplots()\nax.bar(['oslo', 'rome'], [3, 18], label='temp')", nil)
	if r.IsError {
		t.Fatal(text(r))
	}
	var charts []string
	for i, bl := range r.Content {
		if bl.Type == "image" {
			if i+1 >= len(r.Content) || r.Content[i+1].Type != "text" {
				t.Fatalf("no chart text after image %d: %+v", i, r.Content)
			}
			charts = append(charts, r.Content[i+1].Text)
		}
	}
	if len(charts) != 2 {
		t.Fatalf("want two charts, got %q", charts)
	}
	for _, s := range []string{"[chart]", `"Growth"`, `x: "n"`, `y: "value"`, `line "squares", 3 points: (1, 1), (2, 4), (3, 9)`,
		`line "half", 100 points`, `legend: "squares", "half"`} {
		want(t, charts[0], s)
	}
	if strings.Count(charts[0], "(") > 20 {
		t.Fatalf("a 100-point series is not capped: %q", charts[0])
	}
	want(t, charts[1], `bars "temp", 2 bars: oslo=3, rome=18`)
	// A histogram's bars are labelled by their bins.
	want(t, b.ok("python", "plt.hist([1, 2, 2, 3, 3, 3], bins=3, label='h'); None"), `bars "h", 3 bars: [1, 1.667)=1, [1.667, 2.333)=2, [2.333, 3)=3`)
	// The figure shown as the last expression is not sent twice.
	r = b.evalIn(b.env, "python", "fig, ax = plt.subplots()\nax.plot([1, 2])\nfig", nil)
	if n := len(images(r)); n != 1 {
		t.Fatalf("a figure as the last expression came back %d times", n)
	}
}

func jsStaticImports(t *testing.T, b *box) {
	got := b.ok("javascript", "import { readFileSync } from 'fs'; readFileSync('/etc/hostname','utf8')")
	if !strings.HasPrefix(got, "'") || len(got) < 3 {
		t.Fatalf("readFileSync through a static import gave %q", got)
	}
	b.writeFile("lib/calc.js", []byte("module.exports = { add: (a, b) => a + b };\n"))
	b.writeFile("lib/esm.mjs", []byte("export const mul = (a, b) => a * b;\nexport default 'dflt';\n"))
	code := "import calc from './lib/calc.js'\n" +
		"import * as path from 'path'\n" +
		"import dflt, {\n  mul,\n  mul as times,\n} from './lib/esm.mjs'\n" +
		"import 'util'\n" +
		"const s = \"import x from 'nowhere'\"; // import y from 'nowhere'\n" +
		"`${calc.add(1, 2)} ${path.basename('/a/b.txt')} ${dflt} ${mul(2, 3)} ${times(2, 4)} ${s}`"
	if got := b.ok("javascript", code); !strings.Contains(got, "3 b.txt dflt 6 8 import x from 'nowhere'") {
		t.Fatalf("static imports gave %q", got)
	}
	// Names imported stay for later cells, and a re-run cell re-imports.
	if got := b.ok("javascript", "calc.add(2, 2) + mul(1, 1)"); got != "5" {
		t.Fatalf("imported names in a later cell: %q", got)
	}
	b.ok("javascript", "import { readFileSync } from 'fs'")
	// Line numbers of the user's code survive a multi-line import.
	msg := b.fail("javascript", "import {\n  basename,\n} from 'path'\n\nthrow new Error('line five')", "line five", nil)
	want(t, msg, ":5:")
	msg = b.fail("javascript", "import nope from 'nonexistent-pkg-xyz'", "Cannot find package 'nonexistent-pkg-xyz'", nil)
	noInternals(t, msg)
	b.ok("javascript", "export const exported = 7")
	if got := b.ok("javascript", "exported"); got != "7" {
		t.Fatalf("export const: %q", got)
	}
}

func jsTracebacks(t *testing.T, b *box) {
	b.ok("javascript", "function parse(s) {\n  const n = Number(s)\n  if (Number.isNaN(n)) throw new TypeError('not a number: ' + s)\n  return n\n}\nfunction load(rows) { return rows.map(parse) }")
	msg := b.fail("javascript", "load(['1', 'x'])", "TypeError: not a number: x", nil)
	want(t, msg, "at parse")
	noInternals(t, msg)
	msg = b.fail("javascript", "async function later() { await null; throw new RangeError('deep') }\nawait later()", "RangeError: deep", nil)
	noInternals(t, msg)
	// A cell that does not parse says where.
	b.fail("javascript", "let a = 1\nfoo bar", "at line 2: foo bar", nil)
	msg = b.fail("javascript", "require('nonexistent-pkg-abc')", "Cannot find module 'nonexistent-pkg-abc'", nil)
	noInternals(t, msg)
}
