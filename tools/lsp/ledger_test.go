package lsp

import "testing"

func diag(line uint32, sev int, code, msg string) Diagnostic {
	return Diagnostic{Range: Range{Start: Position{Line: line}}, Severity: sev, Code: []byte(`"` + code + `"`), Message: msg}
}

func TestLedger(t *testing.T) {
	l := newLedger()
	const f = "/w/main.go"
	cannot := func(line uint32) Diagnostic { return diag(line, SeverityError, "IncompatibleAssign", "cannot use x") }
	steps := []struct {
		name  string
		diags []Diagnostic
		want  []uint32 // lines of the diagnostics reported as new
	}{
		{"introduce", []Diagnostic{cannot(10)}, []uint32{10}},
		{"moved down", []Diagnostic{cannot(11)}, nil},
		{"second identical", []Diagnostic{cannot(11), cannot(20)}, []uint32{20}},
		{"fix the second", []Diagnostic{cannot(11)}, nil},
		{"same message, other code", []Diagnostic{cannot(11), diag(11, SeverityError, "Other", "cannot use x")}, []uint32{11}},
		{"warning is its own key", []Diagnostic{cannot(11), diag(11, SeverityError, "Other", "cannot use x"), diag(3, SeverityWarning, "IncompatibleAssign", "cannot use x")}, []uint32{3}},
		{"all fixed", nil, nil},
		{"reintroduced after a fix is new again", []Diagnostic{cannot(5)}, []uint32{5}},
	}
	for _, st := range steps {
		got := l.update(f, st.diags)
		if len(got) != len(st.want) {
			t.Fatalf("%s: new = %+v, want lines %v", st.name, got, st.want)
		}
		for i := range got {
			if got[i].Range.Start.Line != st.want[i] {
				t.Errorf("%s: new[%d] at line %d, want %d", st.name, i, got[i].Range.Start.Line, st.want[i])
			}
		}
	}
	// A seeded baseline hides what the file already had; files are separate.
	l.seed("/w/old.go", []Diagnostic{cannot(1)})
	if got := l.update("/w/old.go", []Diagnostic{cannot(2)}); len(got) != 0 {
		t.Errorf("pre-existing diagnostic reported as new: %+v", got)
	}
	if got := l.update("/w/other.go", []Diagnostic{cannot(2)}); len(got) != 1 {
		t.Errorf("a file without a baseline: %+v, want its diagnostic as new", got)
	}
}
