package main

import (
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/files"
)

// registerTools registers every tool family this build ships, in the order
// their specs are listed to a model.
func registerTools(reg *tools.Registry) {
	for _, t := range files.Tools() {
		reg.Register(t)
	}
}
