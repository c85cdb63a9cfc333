package files

import (
	"strings"
	"testing"
)

func mustParse(t *testing.T, text string) []*filePatch {
	t.Helper()
	fps, err := parsePatch(text)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fps
}

func TestParseGitPatch(t *testing.T) {
	text := `From 1234 Mon Sep 17 00:00:00 2001
Subject: [PATCH] change things

diff --git a/src/a.go b/src/a.go
index 83db48f..bf269f4 100644
--- a/src/a.go
+++ b/src/a.go
@@ -1,3 +1,4 @@ package a
 package a
-var x = 1
+var x = 2
+var y = 3
 // end
diff --git a/new.txt b/new.txt
new file mode 100755
index 0000000..e69de29
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
\ No newline at end of file
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/empty b/empty
new file mode 100644
index 0000000..e69de29
diff --git "a/with space.txt" "b/with space.txt"
--- "a/with space.txt"
+++ "b/with space.txt"
@@ -1 +1 @@
-a
+b
-- 
2.39.2
`
	fps := mustParse(t, text)
	if len(fps) != 5 {
		t.Fatalf("got %d files, want 5", len(fps))
	}
	a := fps[0]
	if a.oldPath != "src/a.go" || a.newPath != "src/a.go" || a.isNew || a.isDelete || len(a.hunks) != 1 {
		t.Fatalf("a.go: %+v", a)
	}
	h := a.hunks[0]
	if h.oldStart != 1 || h.oldCount != 3 || h.newCount != 4 || h.added != 2 || h.removed != 1 {
		t.Fatalf("hunk: %+v", h)
	}
	if strings.Join(h.old, "") != "package a\nvar x = 1\n// end\n" || strings.Join(h.new, "") != "package a\nvar x = 2\nvar y = 3\n// end\n" {
		t.Fatalf("hunk lines: %q / %q", h.old, h.new)
	}
	n := fps[1]
	if !n.isNew || n.target() != "new.txt" || n.mode != 0o755 || strings.Join(n.hunks[0].new, "") != "hello\nworld" {
		t.Fatalf("new.txt: %+v %q", n, n.hunks[0].new)
	}
	d := fps[2]
	if !d.isDelete || d.source() != "old.txt" {
		t.Fatalf("old.txt: %+v", d)
	}
	e := fps[3]
	if !e.isNew || e.target() != "empty" || len(e.hunks) != 0 {
		t.Fatalf("empty: %+v", e)
	}
	if fps[4].target() != "with space.txt" {
		t.Fatalf("quoted: %q", fps[4].target())
	}
}

func TestParsePlainAndRename(t *testing.T) {
	fps := mustParse(t, "--- x.go.orig\t2024-01-01 00:00:00\n+++ x.go\t2024-01-01 00:00:01\n@@ -1 +1 @@\n-a\n+b\n")
	if fps[0].target() != "x.go" || fps[0].source() != "x.go" {
		t.Fatalf("plain: %+v", fps[0])
	}
	fps = mustParse(t, "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	if fps[0].target() != "x" {
		t.Fatalf("a/ b/ not stripped in a plain diff: %q", fps[0].target())
	}
	fps = mustParse(t, "diff --git a/old b/new\nsimilarity index 90%\nrename from old\nrename to new\n--- a/old\n+++ b/new\n@@ -1 +1 @@\n-a\n+b\n")
	if !fps[0].rename || fps[0].source() != "old" || fps[0].target() != "new" {
		t.Fatalf("rename: %+v", fps[0])
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"":                                      "the patch is empty",
		"just some text\n":                      "the patch has no file headers",
		"@@ -1 +1 @@\n-a\n+b\n":                 "comes before any file header",
		"*** Begin Patch\n*** Update File: a\n": "not a unified diff",
		"--- a/x\n+++ b/x\n":                    "has no hunks",
		"--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n":       "ends early: its header promises 3 old and 3 new lines, but 1 old and 1 new are missing",
		"--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n*b\n":           `patch line 5 in hunk "@@ -1,2 +1,2 @@" of x starts with "*b"`,
		"--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a\n-b\n+c\n":       "hunk \"@@ -1,1 +1,1 @@\" of x (patch line 3) has more lines than its header says",
		"--- a/x\n+++ b/x\n@@ -one +1 @@\n-a\n":                 "is malformed",
		"diff --git a/x b/x\nBinary files a/x and b/x differ\n": "binary diff",
		"--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n":     "/dev/null on both sides",
		"--- a/x\n+++ b/x\n@@\n+only added\n":                   "no line numbers and no context",
	}
	for text, want := range cases {
		_, err := parsePatch(text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parse(%q) = %v, want it to mention %q", text, err, want)
		}
	}
}

func applyText(t *testing.T, content, patch string) (string, error) {
	t.Helper()
	fps := mustParse(t, patch)
	return applyHunks("f", content, fps[0].hunks, 3)
}

func TestApply(t *testing.T) {
	base := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"
	cases := []struct {
		name, content, patch, want, err string
	}{
		{name: "exact", content: base,
			patch: "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n 2\n-3\n+three\n 4\n",
			want:  "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n"},
		{name: "two hunks shift", content: base,
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n 1\n+1.5\n 2\n@@ -8,2 +9,1 @@\n 8\n-9\n",
			want:  "1\n1.5\n2\n3\n4\n5\n6\n7\n8\n10\n"},
		{name: "offset fuzz", content: base,
			patch: "--- a/f\n+++ b/f\n@@ -4,2 +4,2 @@\n 6\n-7\n+seven\n",
			want:  "1\n2\n3\n4\n5\n6\nseven\n8\n9\n10\n"},
		{name: "beyond fuzz", content: base,
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n 8\n-9\n+nine\n",
			err:   "hunk 1 of f (@@ -1,2 +1,2 @@) does not apply: its lines match at line 8, more than 3 lines from the stated line 1"},
		{name: "content mismatch", content: base,
			patch: "--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n 2\n-x\n+y\n",
			err:   `at line 3 the file has "3" where the hunk expects "x"`},
		{name: "whitespace is not fuzzed", content: "a\n  b\n",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
			err:   `at line 2 the file has "  b" where the hunk expects "b"`},
		{name: "insert at top", content: "a\n",
			patch: "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+z\n", want: "z\na\n"},
		{name: "append at end", content: "a\nb\n",
			patch: "--- a/f\n+++ b/f\n@@ -2,0 +3 @@\n+c\n", want: "a\nb\nc\n"},
		{name: "no newline kept", content: "a\nb",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n", want: "a\nc"},
		{name: "no newline explicit", content: "a\nb",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n", want: "a\nb\n"},
		{name: "bare hunk searched", content: base,
			patch: "--- a/f\n+++ b/f\n@@\n 5\n-6\n+six\n", want: "1\n2\n3\n4\n5\nsix\n7\n8\n9\n10\n"},
		{name: "overlap refused", content: base,
			patch: "--- a/f\n+++ b/f\n@@ -5,1 +5,1 @@\n-5\n+five\n@@ -3,1 +3,1 @@\n-3\n+three\n",
			err:   "which an earlier hunk already changed or passed"},
		{name: "crlf exact", content: "a\r\nb\r\n",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n", want: "a\r\nc\r\n"},
		{name: "empty context line without space", content: "a\n\nb\n",
			patch: "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n", want: "a\n\nc\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := applyText(t, c.content, c.patch)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestApplyNewFile(t *testing.T) {
	fps := mustParse(t, "--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+x\n+y\n")
	got, err := applyHunks("n", "", fps[0].hunks, 3)
	if err != nil || got != "x\ny\n" {
		t.Fatalf("%q %v", got, err)
	}
}
