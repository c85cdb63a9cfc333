package engine

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Dir is a Source over a local directory; paths are relative to Root.
type Dir struct {
	Root string
	Skip []string // directory names not entered
}

var _ Source = Dir{}

// Read implements Source.
func (d Dir) Read(ctx context.Context, paths []string) ([][]byte, error) {
	out := make([][]byte, len(paths))
	for i, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(d.Root, p))
		if err == nil {
			out[i] = b
		}
	}
	return out, nil
}

// List walks the directory for files of language l no larger than maxSize,
// leaving out hidden files and directories, as the search tools do.
func (d Dir) List(l *Language, maxSize int64) ([]FileKey, error) {
	var out []FileKey
	err := filepath.WalkDir(d.Root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := de.Name()
		if de.IsDir() && slices.Contains(d.Skip, name) {
			return filepath.SkipDir
		}
		if p != d.Root && strings.HasPrefix(name, ".") {
			if de.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if de.IsDir() || !de.Type().IsRegular() || !l.Matches(name) {
			return nil
		}
		info, err := de.Info()
		if err != nil || (maxSize > 0 && info.Size() > maxSize) {
			return nil
		}
		rel, _ := filepath.Rel(d.Root, p)
		out = append(out, FileKey{Path: filepath.ToSlash(rel), Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	SortFiles(out)
	return out, err
}
