package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// A walk that asks says which directories it did not enter and why; with
// a skip list of .git alone it enters node_modules unless a .gitignore
// excludes it.
func TestWalkReportsSkippedDirectories(t *testing.T) {
	_, c := startPair(t)
	ctx := testCtx(t)
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		".git/config":               "x",
		"node_modules/pkg/index.js": "x",
		"web/.gitignore":            "node_modules/\n",
		"web/node_modules/m/i.js":   "x",
		"web/app.js":                "x",
		"build/out.js":              "x",
		".gitignore":                "build/\n",
	})
	if err := os.Symlink(filepath.Join(root, "web"), filepath.Join(root, "web-link")); err != nil {
		t.Fatal(err)
	}
	r, err := c.Walk(ctx, &proto.WalkRequest{Root: root, Gitignore: true, SkipDirs: []string{".git"}, ReportSkipped: true})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range r.Files {
		files = append(files, f.Path)
	}
	if !slices.Contains(files, "node_modules/pkg/index.js") || slices.Contains(files, "web/node_modules/m/i.js") || slices.Contains(files, "build/out.js") {
		t.Errorf("files %v: want node_modules entered, web/node_modules and build left out", files)
	}
	want := []proto.SkippedDir{
		{Dir: ".git", Reason: proto.SkipReasonList},
		{Dir: "build", Reason: proto.SkipReasonGitignore},
		{Dir: "web-link", Reason: proto.SkipReasonSymlink},
		{Dir: "web/node_modules", Reason: proto.SkipReasonGitignore},
	}
	slices.SortFunc(r.Skipped, func(a, b proto.SkippedDir) int {
		if a.Dir < b.Dir {
			return -1
		}
		return 1
	})
	if !slices.Equal(r.Skipped, want) {
		t.Errorf("skipped %+v, want %+v", r.Skipped, want)
	}
	// Without the request, nothing is reported (and old callers see the
	// response they always did).
	r, err = c.Walk(ctx, &proto.WalkRequest{Root: root, Gitignore: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Skipped) != 0 {
		t.Errorf("skipped reported unasked: %+v", r.Skipped)
	}
}
