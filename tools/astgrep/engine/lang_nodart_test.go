//go:build !dart

package engine

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/tools/astgrep/engine/dart"
)

// Built without the grammar, Dart is not a language, and asking for it
// says what to do.
func TestDartNotBuiltSaysHowToBuildIt(t *testing.T) {
	if _, ok := reg.Lookup("dart"); ok {
		t.Fatal("dart is registered in a build without the dart tag")
	}
	const want = "Dart grammar not built: run make build (fetches tree-sitter-dart 1.0.0 from npm)"
	if dart.NotBuilt != want {
		t.Errorf("NotBuilt = %q, want %q", dart.NotBuilt, want)
	}
	for _, name := range []string{"dart", "Dart", " DART "} {
		if why, missing := reg.Unavailable(name); !missing || why != want {
			t.Errorf("Unavailable(%q) = %q, %v; want %q", name, why, missing, want)
		}
	}
	if why, missing := reg.UnavailableForPath("lib/src/widgets/x.DART"); !missing || why != want {
		t.Errorf("UnavailableForPath = %q, %v", why, missing)
	}
	for _, name := range []string{"go", "cobol"} {
		if why, missing := reg.Unavailable(name); missing {
			t.Errorf("Unavailable(%q) = %q", name, why)
		}
	}
	if _, missing := reg.UnavailableForPath("main.go"); missing {
		t.Error("a .go file is reported unavailable")
	}
	if strings.Contains(strings.Join(reg.Names(), ","), "dart") {
		t.Errorf("Names() = %v", reg.Names())
	}
}
