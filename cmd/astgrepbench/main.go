// Command astgrepbench measures the structural search engine next to the ast-grep
// CLI on the Go toolchain's own source tree, in one run, and rewrites the
// astgrep section of BENCHMARKS.md with the figures and the targets of
// issue 4 computed from them.
//
//	go run ./cmd/astgrepbench [-out BENCHMARKS.md] [-ast-grep PATH] [-runs 3] [-tree DIR] [--smoke]
//
// --smoke runs once over a small tree ($(go env GOROOT)/src/flag) and checks
// the section renders, leaving -out alone (scripts/test.sh runs it).
//
// Each engine measurement runs in a child process (this binary with
// -child), so its peak memory is its own.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
)

type benchCase struct {
	key, title, pattern string
	// extra names matches only we report, by design (DESIGN.md semantics).
	extra func(text string) bool
	why   string
}

var cases = []benchCase{
	{key: "a", title: "(a) selective", pattern: `fmt.Errorf($A, $$$)`},
	{key: "b", title: "(b) unselective", pattern: `if err != nil { return $$$ }`,
		extra: regexp.MustCompile(`return\s*}$`).MatchString, why: "an empty trailing `$$$` also matches a bare `return`"},
}

// childResult is what a child process reports.
type childResult struct {
	ColdMS  float64  `json:"cold_ms"`
	WarmMS  float64  `json:"warm_ms"`
	Files   int      `json:"files"`
	Parsed  int64    `json:"parsed"`
	MaxRSS  int64    `json:"max_rss_kb"`
	Count   int      `json:"count"`
	Matches []string `json:"matches"` // "file\x00start\x00text"
}

func main() {
	out := flag.String("out", "BENCHMARKS.md", "report to rewrite (only the astgrep section)")
	bin := flag.String("ast-grep", "", "ast-grep binary (default: .tools/ast-grep from scripts/install-ast-grep.sh)")
	runs := flag.Int("runs", 3, "runs of each measurement; the median is reported")
	child := flag.String("child", "", "internal: run one engine measurement for this pattern")
	childTool := flag.String("child-tool", "", "internal: run one ast_grep measurement through an in-process agent")
	tree := flag.String("tree", "", "tree to search (default $(go env GOROOT)/src)")
	smoke := flag.Bool("smoke", false, "one run over a small tree; check the section renders without rewriting -out")
	flag.Parse()
	root := *tree
	if root == "" {
		goroot, err := goRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "astgrepbench:", err)
			os.Exit(1)
		}
		root = filepath.Join(goroot, "src")
		if *smoke {
			root = filepath.Join(root, "flag")
		}
	}
	if *smoke {
		*runs = 1
	}
	if *runs < 1 {
		fmt.Fprintf(os.Stderr, "astgrepbench: -runs is %d; give at least 1\n", *runs)
		os.Exit(2)
	}
	if *childTool != "" {
		if err := runToolChild(root, *childTool); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *child != "" {
		if err := runChild(root, *child); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *bin == "" {
		*bin = filepath.Join(".tools", "ast-grep", "node_modules", ".bin", "ast-grep")
	}
	if _, err := os.Stat(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "astgrepbench: the ast-grep CLI is not at %s: run scripts/install-ast-grep.sh first\n", *bin)
		os.Exit(1)
	}
	section, err := measure(*bin, root, *runs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "astgrepbench:", err)
		os.Exit(1)
	}
	fmt.Print(section)
	if err := bench.Publish(*out, "astgrep", section, *smoke, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "astgrepbench:", err)
		os.Exit(1)
	}
}

// runChild lists GOROOT/src, searches twice on one engine and prints JSON.
func runChild(root, pattern string) error {
	ctx := context.Background()
	e := engine.New()
	l, _ := e.Registry().Lookup("go")
	p, err := e.Compile(ctx, l, pattern)
	if err != nil {
		return err
	}
	d := engine.Dir{Root: root}
	t0 := time.Now()
	files, err := d.List(l, 1<<20)
	if err != nil {
		return err
	}
	res, err := e.Search(ctx, p, d, files)
	if err != nil {
		return err
	}
	cold := time.Since(t0)
	t1 := time.Now()
	files, _ = d.List(l, 1<<20) // the unchanged tree is walked again
	if _, err := e.Search(ctx, p, d, files); err != nil {
		return err
	}
	warm := time.Since(t1)
	parsed, _ := e.Stats()
	r := childResult{ColdMS: ms(cold), WarmMS: ms(warm), Files: len(files), Parsed: parsed}
	for _, f := range res {
		for _, m := range f.Matches {
			r.Matches = append(r.Matches, f.File.Path+"\x00"+fmt.Sprint(m.Start)+"\x00"+m.Text)
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	r.MaxRSS = ru.Maxrss
	return json.NewEncoder(os.Stdout).Encode(r)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type peerResult struct {
	ms      float64
	maxRSS  int64
	matches []string
}

func runPeer(bin, root, pattern string) (peerResult, error) {
	cmd := exec.Command(bin, "run", "-p", pattern, "-l", "go", "--json=stream", root)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return peerResult{}, fmt.Errorf("ast-grep: %v: %s", err, stderr.String())
	}
	r := peerResult{ms: ms(time.Since(t0))}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m struct {
			Text  string `json:"text"`
			File  string `json:"file"`
			Range struct {
				Byte struct{ Start uint32 } `json:"byteOffset"`
			} `json:"range"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return r, err
		}
		rel, _ := filepath.Rel(root, m.File)
		r.matches = append(r.matches, filepath.ToSlash(rel)+"\x00"+fmt.Sprint(m.Range.Byte.Start)+"\x00"+m.Text)
	}
	return r, nil
}

func runEngine(root, pattern string) (childResult, error) {
	return runChildMode(root, "-child", pattern)
}

func runChildMode(root, mode, pattern string) (childResult, error) {
	self, err := os.Executable()
	if err != nil {
		return childResult{}, err
	}
	cmd := exec.Command(self, "-tree", root, mode, pattern)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return childResult{}, fmt.Errorf("engine child: %v: %s", err, stderr.String())
	}
	var r childResult
	return r, json.Unmarshal(stdout.Bytes(), &r)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func maxOf(xs []int64) int64 {
	var m int64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func measure(bin, root string, runs int) (string, error) {
	var b strings.Builder
	load := func() string {
		l, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(l))[:3], " ")
	}
	version, _ := exec.Command(bin, "--version").Output()
	fmt.Fprintf(&b, "## Structural search: ast_grep's engine next to the ast-grep CLI\n\n")
	fmt.Fprintf(&b, "_Measured %s on %d cores, %s, peer %s, tree `%s` (Go %s); load average at the start %s._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), runtime.GOOS+"/"+runtime.GOARCH,
		strings.TrimSpace(string(version)), treeName(root), runtime.Version(), load())
	b.WriteString("| search | ast-grep CLI | engine, cold | engine, again on the unchanged tree | engine/peer | target | peak RSS peer / engine | matches peer / engine |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |\n")
	var notes []string
	for _, c := range cases {
		var peerMS, coldMS, warmMS []float64
		var peerRSS, ourRSS []int64
		var peer peerResult
		var ours childResult
		for i := 0; i < runs; i++ {
			// Alternate, so both see the same page cache and load.
			p, err := runPeer(bin, root, c.pattern)
			if err != nil {
				return "", err
			}
			o, err := runEngine(root, c.pattern)
			if err != nil {
				return "", err
			}
			peer, ours = p, o
			peerMS, coldMS, warmMS = append(peerMS, p.ms), append(coldMS, o.ColdMS), append(warmMS, o.WarmMS)
			peerRSS, ourRSS = append(peerRSS, p.maxRSS), append(ourRSS, o.MaxRSS)
		}
		same, extras, missing, extraOK := compare(peer.matches, ours.Matches, c.extra)
		pm, cm, wm := median(peerMS), median(coldMS), median(warmMS)
		ratioA := cm / pm
		limit := 0.5
		if c.key == "b" {
			limit = 1.0
		}
		matchOK := missing == 0 && extras == extraOK
		fmt.Fprintf(&b, "| %s `%s` | %.0f ms | %.0f ms | %.1f ms | %.2fx | ≤ %.1fx: %s | %.0f / %.0f MiB | %d / %d: %s |\n",
			c.title, c.pattern, pm, cm, wm, ratioA, limit, mark(ratioA <= limit),
			float64(maxOf(peerRSS))/1024, float64(maxOf(ourRSS))/1024, len(peer.matches), len(ours.Matches), matchSummary(same, missing, extras, extraOK))
		fmt.Fprintf(&b, "| (c) `%s` again | %.0f ms | | %.1f ms | %.3fx | ≤ 0.1x: %s | | |\n", c.pattern, pm, wm, wm/pm, mark(wm/pm <= 0.1))
		if !matchOK {
			notes = append(notes, fmt.Sprintf("`%s`: the match sets differ beyond the documented cases (%d ast-grep matches we lack, %d extra of ours unexplained).", c.pattern, missing, extras-extraOK))
		}
		if c.why != "" && extraOK > 0 {
			notes = append(notes, fmt.Sprintf("`%s`: %d extra matches of ours are the documented difference: %s; ast-grep requires a node there.", c.pattern, extraOK, c.why))
		}
		notes = append(notes, fmt.Sprintf("`%s`: %d Go files listed (hidden files and files over 1 MiB left out), %d parsed in the cold search (the rest lack the pattern's literal tokens); the repeated search parsed and read nothing.", c.pattern, ours.Files, ours.Parsed))
	}
	b.WriteString("\n| ast_grep tool, files read through an in-process sandbox agent | cold | again | matches |\n| --- | ---: | ---: | ---: |\n")
	for _, c := range cases {
		var cold, warm []float64
		var last childResult
		for i := 0; i < runs; i++ {
			r, err := runChildMode(root, "-child-tool", c.pattern)
			if err != nil {
				return "", err
			}
			last = r
			cold, warm = append(cold, r.ColdMS), append(warm, r.WarmMS)
		}
		fmt.Fprintf(&b, "| `%s` | %.0f ms | %.1f ms | %d |\n", c.pattern, median(cold), median(warm), last.Count)
	}
	fmt.Fprintf(&b, "\nHow: `go run ./cmd/astgrepbench` runs `ast-grep run -p PATTERN -l go --json=stream` and the engine (each in its own process, alternating, %d runs each, median wall time, largest peak RSS) over the same tree. The engine's cold time includes walking the tree, reading every file and parsing the files that pass the literal prefilter; \"again\" is a second search for the same pattern on the same engine after walking the tree again (file size and mtime unchanged: answered from the cache). Matches are compared as (file, start byte, text). The first table measures the engine on the local file system; the second calls the ast_grep tool itself with the tree as the workspace of a sandbox agent served in the same process over a pipe (one walk, then batched reads over the agent protocol; no container), which is the tool's real path minus Docker.\n\n", runs)
	for _, n := range notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String(), nil
}

func matchSummary(same, missing, extras, extraOK int) string {
	if missing == 0 && extras == 0 {
		return "same"
	}
	if missing == 0 && extras == extraOK {
		return fmt.Sprintf("same but %d documented extra", extras)
	}
	return fmt.Sprintf("**differ** (%d missing, %d extra)", missing, extras)
}

// compare returns how many matches both have, how many of ours the peer
// lacks, how many of the peer's we lack, and how many of our extras the
// documented rule explains.
func compare(peer, ours []string, extra func(string) bool) (same, extras, missing, extraOK int) {
	in := map[string]bool{}
	for _, m := range ours {
		in[m] = true
	}
	theirs := map[string]bool{}
	for _, m := range peer {
		theirs[m] = true
		if in[m] {
			same++
		} else {
			missing++
		}
	}
	for _, m := range ours {
		if theirs[m] {
			continue
		}
		extras++
		text := m[strings.LastIndexByte(m, 0)+1:]
		if (extra != nil && extra(text)) || strings.Contains(text, "//") || strings.Contains(text, "/*") {
			extraOK++
		}
	}
	return
}

// treeName shows root as the report names it: relative to $(go env GOROOT)
// when it is under it, so the section does not carry this machine's paths.
func treeName(root string) string {
	goroot, err := goRoot()
	if err != nil {
		return root
	}
	if rel, err := filepath.Rel(goroot, root); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(filepath.Join("$(go env GOROOT)", rel))
	}
	return root
}

// goRoot asks the go command on PATH for its GOROOT: the root this program
// was built with may not exist where the binary runs.
func goRoot() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "env", "GOROOT")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT (the default tree to search; give -tree to search another): %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
