//go:build !dart || !cgo

package dart

import (
	"unsafe"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Built reports whether this binary holds the grammar.
const Built = false

// Language reports that this binary was built without the grammar.
func Language() (unsafe.Pointer, error) {
	return nil, errdefs.FailedPrecondition(NotBuilt)
}
