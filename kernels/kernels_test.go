package kernels

import (
	"strings"
	"testing"
)

func TestPrograms(t *testing.T) {
	for lang, want := range map[string][]string{
		"python": {"kernel.py", "sandboxd_magics.py", "sandboxd_mpl.py", "sandboxd_ipython.py", "sandboxd_rich.py",
			"sandboxd_chart.py", "sandboxd_hooks.py"},
		"javascript": {"kernel.js", "imports.js"},
	} {
		p, err := Get(lang)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.Files[p.Entry]; !ok {
			t.Fatalf("%s: entry %s is not among the files", lang, p.Entry)
		}
		for _, f := range want {
			if len(p.Files[f]) == 0 {
				t.Fatalf("%s: %s is missing or empty", lang, f)
			}
		}
		again, _ := Get(lang)
		if again.Hash != p.Hash || !strings.HasPrefix(p.Hash, lang+"-") {
			t.Fatalf("%s: hash %q then %q", lang, p.Hash, again.Hash)
		}
	}
	if _, err := Get("ruby"); err == nil || !strings.Contains(err.Error(), "use python or javascript") {
		t.Fatalf("unknown language: %v", err)
	}
}
