package chart

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// files is the chart as it is installed: what .helmignore lets through
// (no Go files, no testdata). "all:" keeps templates/_helpers.tpl.
//
//go:embed Chart.yaml values.yaml values.schema.json README.md .helmignore all:templates dashboards
var files embed.FS

// Load returns the chart compiled into the binary, so a program installing
// it needs no checkout (cmd/sandboxd-cluster).
func Load() (*helmchart.Chart, error) {
	var bufs []*loader.BufferedFile
	err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		bufs = append(bufs, &loader.BufferedFile{Name: path.Clean(name), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the embedded chart: %w", err)
	}
	c, err := loader.LoadFiles(bufs)
	if err != nil {
		return nil, fmt.Errorf("load the embedded chart: %w", err)
	}
	return c, nil
}
