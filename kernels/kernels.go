// Package kernels embeds the eval tool's kernel programs: the Python kernel
// (kernels/python) and the JavaScript kernel (kernels/node). sandboxd ships
// them into a sandbox (or a host folder) through the sandbox agent, so any
// image with python3 or node can run eval; they depend on nothing else.
package kernels

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

//go:embed python/*.py node/*.js
var files embed.FS

// Program is one kernel's files, ready to be written into a directory.
type Program struct {
	Language string
	// Files maps a file name to its contents (no sub-directories).
	Files map[string][]byte
	// Entry is the file the interpreter runs.
	Entry string
	// Hash identifies the contents: a directory named after it never holds
	// another version, so a kernel already shipped is not written again.
	Hash string
}

// Languages are the kernels this build carries, by eval's language name.
var dirs = map[string]struct{ dir, entry string }{
	"python":     {"python", "kernel.py"},
	"javascript": {"node", "kernel.js"},
}

// Get returns the kernel program for language ("python" or "javascript").
func Get(language string) (*Program, error) {
	d, ok := dirs[language]
	if !ok {
		return nil, fmt.Errorf("no kernel for language %q; use python or javascript", language)
	}
	entries, err := fs.ReadDir(files, d.dir)
	if err != nil {
		return nil, err
	}
	p := &Program{Language: language, Files: map[string][]byte{}, Entry: d.entry}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := files.ReadFile(path.Join(d.dir, n))
		if err != nil {
			return nil, err
		}
		p.Files[n] = b
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	p.Hash = language + "-" + hex.EncodeToString(h.Sum(nil))[:16]
	return p, nil
}
