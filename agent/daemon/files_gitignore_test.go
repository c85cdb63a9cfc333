package daemon

import (
	"strings"
	"testing"
)

func TestGitignoreMatcher(t *testing.T) {
	root := parseGitignore("", strings.NewReader(`
# comment
*.log
!keep.log
build/
/top.txt
docs/*.md
**/gen/**
a/**/z
[Tt]emp?
\#hash
trailing   
`))
	sub := parseGitignore("sub", strings.NewReader("local.txt\n!/reinclude.log\n"))
	stack := ignoreStack{root, sub}
	cases := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"x.log", false, true},
		{"deep/down/x.log", false, true},
		{"keep.log", false, false},
		{"deep/keep.log", false, false},
		{"build", true, true},
		{"src/build", true, true},
		{"build", false, false}, // dir-only pattern, a file named build
		{"top.txt", false, true},
		{"src/top.txt", false, false}, // anchored
		{"docs/a.md", false, true},
		{"docs/sub/a.md", false, false}, // * does not cross /
		{"src/gen/x.go", false, true},
		{"gen/x.go", false, true},
		{"a/z", false, true},
		{"a/b/c/z", false, true},
		{"b/a/z", false, false},
		{"Temp1", false, true},
		{"temp1", false, true},
		{"tempxx", false, false},
		{"#hash", false, true},
		{"trailing", false, true},
		{"main.go", false, false},
		{"sub/local.txt", false, true},
		{"local.txt", false, false}, // sub's rules stay in sub
		{"sub/reinclude.log", false, false},
		{"sub/deeper/reinclude.log", false, true},
	}
	for _, tc := range cases {
		if got := stack.ignored(tc.path, tc.isDir); got != tc.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", tc.path, tc.isDir, got, tc.want)
		}
	}
}
