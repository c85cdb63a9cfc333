package kernels

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The JavaScript kernel's module-syntax rewrite, case by case: what a cell
// becomes, that it compiles as the body of an async function (how the
// REPL runs a cell with top-level await), and that it keeps its line count.
func TestNodeImportRewrite(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed on this machine")
	}
	p, err := Get("javascript")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "imports.js")
	if err := os.WriteFile(file, p.Files["imports.js"], 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, want string }{
		{"import { readFileSync } from 'fs'; readFileSync('/etc/hostname', 'utf8')",
			"const { readFileSync } = await __sandboxd_import('fs'); readFileSync('/etc/hostname', 'utf8')"},
		{"import fs from \"fs\"", "const fs = ((m) => m.default ?? m)(await __sandboxd_import(\"fs\"));"},
		{"import * as path from 'path'", "const path = await __sandboxd_import('path');"},
		{"import 'util'", "await __sandboxd_import('util');"},
		{"import {\n  a,\n  b as c,\n  default as d,\n} from './m.js'\nuse(a)",
			"const { a, b: c, default: d } = await __sandboxd_import('./m.js');\n\n\n\n\nuse(a)"},
		{"import x, { y } from 'm'", "const [x, { y }] = ((m) => [m.default ?? m, m])(await __sandboxd_import('m'));"},
		{"import x, * as ns from 'm'", "const [x, ns] = ((m) => [m.default ?? m, m])(await __sandboxd_import('m'));"},
		{"import data from './d.json' with { type: 'json' }",
			"const data = ((m) => m.default ?? m)(await __sandboxd_import('./d.json', { with: { type: 'json' } }));"},
		{"let n = 1\nimport y from 'y'", "let n = 1\nconst y = ((m) => m.default ?? m)(await __sandboxd_import('y'));"},
		{"if (ok) { const m = await import('./m.js') }", "if (ok) { const m = await __sandboxd_import('./m.js') }"},
		{"const t = `${(await import('./x.js')).v}`", "const t = `${(await __sandboxd_import('./x.js')).v}`"},
		{"export const q = 1; export function f() {}", "const q = 1; function f() {}"},
		// Left alone: module syntax inside strings, comments, templates and
		// regexps; member calls named import; import.meta.
		{"const s = \"import x from 'y'\"; // import z from 'q'\n/* import a from 'b' */ `import ${'q'} from`", ""},
		{"const re = /import x from 'y'/g; re.test(s) && a / b / c", ""},
		{"loader.import('x'); obj?.import", ""},
		{"const o = { import: 1 }; o.import", ""},
	}
	var ins []string
	for _, c := range cases {
		ins = append(ins, c.in)
	}
	raw, _ := json.Marshal(ins)
	script := `const { rewrite } = require(process.argv[1]);
const vm = require('vm');
const cells = JSON.parse(require('fs').readFileSync(0, 'utf8'));
console.log(JSON.stringify(cells.map((c) => {
  const out = rewrite(c);
  let compiles = true;
  try { new vm.Script('(async () => {\n' + out + '\n})'); } catch (e) { compiles = String(e); }
  return { out, compiles };
})));`
	cmd := exec.Command(node, "-e", script, file)
	cmd.Stdin = strings.NewReader(string(raw))
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, got)
	}
	var outs []struct {
		Out      string `json:"out"`
		Compiles any    `json:"compiles"`
	}
	if err := json.Unmarshal(got, &outs); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	for i, c := range cases {
		want := c.want
		if want == "" {
			want = c.in
		}
		if outs[i].Out != want {
			t.Errorf("%q\n became %q\n want   %q", c.in, outs[i].Out, want)
		}
		if outs[i].Compiles != true && c.want != "" {
			t.Errorf("%q rewritten does not compile: %v", c.in, outs[i].Compiles)
		}
		if strings.Count(outs[i].Out, "\n") != strings.Count(c.in, "\n") {
			t.Errorf("%q: line count changed", c.in)
		}
	}
}
