package bench

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// familyLine is one uncommented entry of scripts/bench.sh's families list.
var familyLine = regexp.MustCompile(`(?m)^\s*"([a-z0-9_-]+)\s+([a-z]+)\s+(cmd|test|gobench)\s+([^\s"]+)`)

// TestEveryBenchmarkIsAFamily keeps `make bench` and the test command's
// smoke run complete: every benchmark command under cmd/ is a family of
// scripts/bench.sh, and every command family takes --smoke (which the
// smoke run passes), so a new benchmark cannot be left out of either.
func TestEveryBenchmarkIsAFamily(t *testing.T) {
	script, err := os.ReadFile("../scripts/bench.sh")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{} // package dir -> family
	for _, m := range familyLine.FindAllStringSubmatch(string(script), -1) {
		if m[3] == "cmd" {
			listed[filepath.Clean(m[4])] = m[1]
		}
	}
	if len(listed) == 0 {
		t.Fatal("scripts/bench.sh lists no command families")
	}
	dirs, err := filepath.Glob("../cmd/*bench*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		pkg := "cmd/" + filepath.Base(d)
		if _, ok := listed[pkg]; !ok {
			t.Errorf("%s is a benchmark command but not a family of scripts/bench.sh; add one line to its families list", pkg)
		}
	}
	for pkg, family := range listed {
		files, _ := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		smoke := false
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			smoke = smoke || strings.Contains(string(src), `"smoke"`)
		}
		if !smoke {
			t.Errorf("family %s (%s) has no --smoke flag; the test command runs every family with --smoke (minimal size, bench.Publish with smoke set)", family, pkg)
		}
	}
}
