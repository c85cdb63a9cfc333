// Package lint holds the checks on the module's shape that go vet and
// staticcheck do not make: which packages may import which (its tests,
// run by scripts/lint.sh). It has no code of its own.
package lint
