package lsp

import (
	"strings"
	"testing"
)

func TestPositionEncodings(t *testing.T) {
	// "größe" has 2-byte letters; 😀 is 4 bytes, 2 UTF-16 units, 1 rune.
	doc := newDocument("ascii\nx := \"größe\" + 😀name\r\nlast")
	line := doc.line(1)
	if line != "x := \"größe\" + 😀name" {
		t.Fatalf("line 1 = %q (the CR must be dropped)", line)
	}
	col := strings.Index(line, "name")
	for _, tc := range []struct {
		enc  string
		want uint32
	}{
		{encUTF16, 17}, // 15 BMP characters before 😀, then 2 units for it
		{encUTF8, uint32(col)},
		{encUTF32, 16},
	} {
		p := doc.position(1, col, tc.enc)
		if p.Line != 1 || p.Character != tc.want {
			t.Errorf("%s: position of name = %+v, want line 1 character %d", tc.enc, p, tc.want)
		}
		if off := doc.offset(p, tc.enc); off != doc.lines[1]+col {
			t.Errorf("%s: offset(%+v) = %d, want %d", tc.enc, p, off, doc.lines[1]+col)
		}
	}
	// Half a surrogate pair rounds to the character's start; past the end
	// of a line clamps to its end.
	emoji := strings.Index(line, "😀")
	if got := doc.offset(Position{Line: 1, Character: 16}, encUTF16); got != doc.lines[1]+emoji {
		t.Errorf("inside a surrogate pair: offset %d, want %d", got, doc.lines[1]+emoji)
	}
	if got := doc.offset(Position{Line: 0, Character: 99}, encUTF16); got != 5 {
		t.Errorf("past the end of line 0: offset %d, want 5", got)
	}
	if doc.lineCount() != 3 || newDocument("a\nb\n").lineCount() != 2 || newDocument("").lineCount() != 1 {
		t.Errorf("line counts wrong: %d %d %d", doc.lineCount(), newDocument("a\nb\n").lineCount(), newDocument("").lineCount())
	}
}

func TestLocate(t *testing.T) {
	doc := newDocument("func größe(s Square) float64 { return s.Side * s.Side }\nx := fmt.Println(xs, x)\n")
	cases := []struct {
		line    int
		symbol  string
		wantCol int // byte column of the pointed-at identifier
		wantErr string
	}{
		{1, "größe", 5, ""},
		{1, "Square", strings.Index(doc.line(0), "Square"), ""},
		{1, "Side", 0, `occurs 2 times on line 1 of f.go; pick one with "Side#1"`},
		{1, "Side#2", strings.LastIndex(doc.line(0), "Side"), ""},
		{1, "Side#3", 0, "so #3 does not exist"},
		{1, "Circle", 0, `symbol "Circle" is not on line 1 of f.go; the line reads: "func größe`},
		{2, "x", 0, "occurs 2 times"}, // whole-identifier matches: x and x, not the x in xs
		{2, "x#2", strings.LastIndex(doc.line(1), "x"), ""},
		{2, "fmt.Println", strings.Index(doc.line(1), "Println"), ""}, // points at the last identifier
		{2, "xs", strings.Index(doc.line(1), "xs"), ""},
		{3, "x", 0, "line 3 is out of range: f.go has 2 lines"},
		{0, "x", 0, "line 0 is out of range"},
	}
	for _, tc := range cases {
		tg, err := locate(doc, "f.go", tc.line, tc.symbol)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("locate(%d, %q): err %v, want one containing %q", tc.line, tc.symbol, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("locate(%d, %q): %v", tc.line, tc.symbol, err)
			continue
		}
		if tg.byteCol != tc.wantCol {
			t.Errorf("locate(%d, %q) points at byte %d, want %d", tc.line, tc.symbol, tg.byteCol, tc.wantCol)
		}
	}
	// The ambiguity error shows each occurrence in context, never a column.
	_, err := locate(doc, "f.go", 1, "Side")
	if !strings.Contains(err.Error(), "#1: …") || !strings.Contains(err.Error(), "[Side]") {
		t.Errorf("ambiguity error does not show occurrences: %v", err)
	}
}

func TestApplyEdits(t *testing.T) {
	text := "a := größe\nb := größe + größe\n"
	doc := newDocument(text)
	var edits []TextEdit
	for _, at := range []struct{ line, col int }{{0, strings.Index(doc.line(0), "größe")}, {1, strings.Index(doc.line(1), "größe")}, {1, strings.LastIndex(doc.line(1), "größe")}} {
		start := doc.position(at.line, at.col, encUTF16)
		end := doc.position(at.line, at.col+len("größe"), encUTF16)
		edits = append(edits, TextEdit{Range: Range{start, end}, NewText: "size"})
	}
	out, lines, err := applyEdits(text, []TextEdit{edits[2], edits[0], edits[1]}, encUTF16)
	if err != nil {
		t.Fatal(err)
	}
	if out != "a := size\nb := size + size\n" {
		t.Errorf("applyEdits = %q", out)
	}
	if len(lines) != 3 || lines[0] != 0 || lines[2] != 1 {
		t.Errorf("edited lines = %v, want [0 1 1]", lines)
	}
	if _, _, err := applyEdits(text, []TextEdit{edits[0], edits[0]}, encUTF16); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlapping edits: err %v", err)
	}
}

func TestParseLocations(t *testing.T) {
	for name, raw := range map[string]string{
		"location": `{"uri":"file:///w/a.go","range":{"start":{"line":3,"character":1},"end":{"line":3,"character":2}}}`,
		"list":     `[{"uri":"file:///w/a.go","range":{"start":{"line":3,"character":1},"end":{"line":3,"character":2}}}]`,
		"links":    `[{"targetUri":"file:///w/a.go","targetRange":{"start":{"line":1,"character":0},"end":{"line":9,"character":0}},"targetSelectionRange":{"start":{"line":3,"character":1},"end":{"line":3,"character":2}}}]`,
	} {
		locs, err := parseLocations([]byte(raw))
		if err != nil || len(locs) != 1 || locs[0].URI != "file:///w/a.go" || locs[0].Range.Start.Line != 3 {
			t.Errorf("%s: %+v %v", name, locs, err)
		}
	}
	if locs, err := parseLocations([]byte("null")); err != nil || locs != nil {
		t.Errorf("null: %+v %v", locs, err)
	}
}

func TestURIRoundTrip(t *testing.T) {
	for _, p := range []string{"/workspace/a b/größe.go", "/w/x#y?.go"} {
		if got := uriPath(fileURI(p)); got != p {
			t.Errorf("uriPath(fileURI(%q)) = %q", p, got)
		}
	}
	if normURI("file:///w/a%20b.go") != normURI("file:///w/a b.go") {
		t.Errorf("differently escaped URIs do not match")
	}
}
