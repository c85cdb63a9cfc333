package chart

import (
	"slices"
	"testing"
)

// The chart compiled into binaries is the one in this directory, file for
// file: a template added here and missed by the embed pattern would be
// absent from every install by cmd/sandboxd-cluster.
func TestEmbeddedChartIsTheDirectory(t *testing.T) {
	emb, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := load(t)
	if emb.Metadata.Version != dir.Metadata.Version || !slices.Equal(emb.Schema, dir.Schema) {
		t.Errorf("embedded chart %s (schema %d bytes), directory %s (%d bytes)", emb.Metadata.Version, len(emb.Schema), dir.Metadata.Version, len(dir.Schema))
	}
	want := map[string]string{}
	for _, f := range append(dir.Templates, dir.Files...) {
		want[f.Name] = string(f.Data)
	}
	got := map[string]string{}
	for _, f := range append(emb.Templates, emb.Files...) {
		got[f.Name] = string(f.Data)
	}
	for name, data := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s is in the chart directory but not in the embedded chart", name)
		} else if g != data {
			t.Errorf("%s differs between the directory and the embedded chart", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s is embedded but not part of the chart in the directory (.helmignore)", name)
		}
	}
	if len(emb.Templates) < 10 {
		t.Errorf("the embedded chart has %d templates", len(emb.Templates))
	}
}
