package engine

import (
	"archive/zip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cHeaderCases run over the kernel's user-space headers, which every
// Debian machine that builds C has (linux-libc-dev, a dependency of
// libc6-dev): real code in a tree no one here wrote, with bit-fields.
var cHeaderCases = []diffCase{
	{pattern: `unsigned int $F : $W;`, peer: `pattern: {context: "struct S { unsigned int $F : $W; };", selector: field_declaration}`},
	{pattern: `__u8 $F : $W;`, peer: `pattern: {context: "struct S { __u8 $F : $W; };", selector: field_declaration}`},
	// bpf.h and others pad with anonymous bit-fields (`__u32 :24;`).
	{pattern: `$T $F : $W;`, peer: `pattern: {context: "struct S { $T $F : $W; };", selector: field_declaration}`},
	// ast-grep reads the fragment alone as an error.
	{pattern: `struct $S { $$$ }`, peer: `pattern: {context: "struct $S { $$$ };", selector: struct_specifier}`},
	{pattern: `#define $N $V`},
	{pattern: `sizeof($X)`},
	{pattern: `typedef $T $N;`},
	{pattern: `enum $E { $$$ }`},
	{pattern: `$A << $B`},
}

func TestDifferentialKernelHeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test over /usr/include/linux skipped in -short mode")
	}
	bin := astGrepBin(t)
	root := "/usr/include/linux"
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no kernel headers to compare on (install linux-libc-dev): %v", err)
	}
	l, _ := NewRegistry().Lookup("c")
	peer := peerHits(t, bin, "c", root, cHeaderCases)
	ours, listed, unclean := ourHits(t, l, root, nil, cHeaderCases)
	same := compareHits(t, "c", cHeaderCases, ours, peer, listed, unclean)
	t.Logf("/usr/include/linux: %d of %d searches agree with ast-grep", same, len(cHeaderCases))
}

// npmCases run over npm's own sources (with its node_modules), which are
// on every machine the ast-grep CLI was installed on by
// scripts/install-ast-grep.sh, since it installs it with npm.
var npmCases = []diffCase{
	{pattern: `$K: $V`, peer: `pattern: {context: "({ $K: $V })", selector: pair}`},
	{pattern: `require($M)`},
	{pattern: `module.exports = $X`},
	{pattern: `async function $F($$$) { $$$ }`},
	{pattern: `await $X`, extra: "ast-grep's bundled grammar reads `await (0, f)(x)` as a call of a function named await; tree-sitter-javascript v0.23.1 as awaiting the call", allowed: awaitParen},
	{pattern: `new Promise($$$)`},
	{pattern: `$A ?? $B`},
	{pattern: `if (!$X) { $$$ }`},
}

func TestDifferentialNpm(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test over npm's sources skipped in -short mode")
	}
	bin := astGrepBin(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("npm is not installed, so there are no npm sources to compare on: %v", err)
	}
	cli, err := filepath.EvalSymlinks(npm)
	if err != nil {
		t.Skip(err)
	}
	root := filepath.Dir(filepath.Dir(cli)) // .../npm/bin/npm-cli.js
	if _, err := os.Stat(filepath.Join(root, "package.json")); err != nil {
		t.Skipf("npm at %s is not laid out as a package: %v", root, err)
	}
	l, _ := NewRegistry().Lookup("javascript")
	peer := peerHits(t, bin, "javascript", root, npmCases)
	ours, listed, unclean := ourHits(t, l, root, nil, npmCases)
	same := compareHits(t, "javascript", npmCases, ours, peer, listed, unclean)
	t.Logf("%s: %d of %d searches agree with ast-grep", root, same, len(npmCases))
}

// awaitParen: an await whose operand starts with a parenthesis.
func awaitParen(h hit) bool { return regexp.MustCompile(`^await\s*\(`).MatchString(h.text) }

// jdkCases run over the JDK's own java.util and java.lang sources.
var jdkCases = []diffCase{
	{pattern: `for (int $I = 0; $I < $N; $I++) $$$BODY`},
	{pattern: `for (int $I = 0; $I < $N; $I++) $BODY`},
	{pattern: `for (int $I = 0; $I < $N; $I++) { $$$ }`},
	{pattern: `while ($C) $BODY`},
	{pattern: `if ($C) $BODY`},
	{pattern: `private static final $T $F = $V;`, peer: `pattern: {context: "class A { private static final $T $F = $V; }", selector: field_declaration}`},
	{pattern: `throw new $E($$$)`},
}

func TestDifferentialJDK(t *testing.T) {
	if testing.Short() {
		t.Skip("differential test over the JDK's sources skipped in -short mode")
	}
	bin := astGrepBin(t)
	root := jdkSources(t)
	l, _ := NewRegistry().Lookup("java")
	peer := peerHits(t, bin, "java", root, jdkCases)
	ours, listed, unclean := ourHits(t, l, root, nil, jdkCases)
	same := compareHits(t, "java", jdkCases, ours, peer, listed, unclean)
	t.Logf("JDK java.util and java.lang: %d of %d searches agree with ast-grep", same, len(jdkCases))
}

// jdkSources unpacks java.util and java.lang from the JDK's src.zip
// (JDK_SRC_ZIP, else the first readable one under /usr/lib/jvm) into a
// temporary directory.
func jdkSources(t *testing.T) string {
	t.Helper()
	zips := []string{os.Getenv("JDK_SRC_ZIP")}
	if h := os.Getenv("JAVA_HOME"); h != "" {
		zips = append(zips, filepath.Join(h, "lib", "src.zip"))
	}
	found, _ := filepath.Glob("/usr/lib/jvm/*/lib/src.zip")
	zips = append(zips, found...)
	for _, z := range zips {
		if z == "" {
			continue
		}
		r, err := zip.OpenReader(z)
		if err != nil {
			continue // a dangling link of a JDK without sources
		}
		defer r.Close()
		dst := t.TempDir()
		const capBytes = 256 << 20 // the two packages are about 25 MiB
		var total int64
		for _, f := range r.File {
			if !strings.HasSuffix(f.Name, ".java") || !(strings.HasPrefix(f.Name, "java.base/java/util/") || strings.HasPrefix(f.Name, "java.base/java/lang/")) {
				continue
			}
			if total += int64(f.UncompressedSize64); total > capBytes {
				t.Fatalf("%s: java.util and java.lang hold over %d bytes; not a JDK source archive?", z, capBytes)
			}
			p := filepath.Join(dst, filepath.FromSlash(f.Name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(io.LimitReader(rc, capBytes))
			rc.Close()
			if err != nil {
				t.Fatalf("%s: %s: %v", z, f.Name, err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if total == 0 {
			continue
		}
		return dst
	}
	t.Skip("no JDK source archive (src.zip) to compare on: install a JDK with its sources or set JDK_SRC_ZIP")
	return ""
}
