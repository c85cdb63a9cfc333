package engine

import (
	"errors"
	"strings"
	"testing"

	sitter "github.com/tree-sitter/go-tree-sitter"

	"github.com/sandboxd/sandboxd/errdefs"
)

// A grammar generated for an ABI the runtime cannot read is refused with
// the versions on both sides, never loaded.
func TestCheckABIRefusesAnUnreadableGrammar(t *testing.T) {
	for _, abi := range []uint32{sitter.MIN_COMPATIBLE_LANGUAGE_VERSION - 1, sitter.LANGUAGE_VERSION + 1} {
		err := checkABI("tree-sitter-dart 9.9.9", abi)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) {
			t.Fatalf("ABI %d: %v, want a failed precondition", abi, err)
		}
		for _, want := range []string{"tree-sitter-dart 9.9.9", "ABI", "scripts/fetch-dart-grammar.sh"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ABI %d: %q lacks %q", abi, err, want)
			}
		}
	}
	for abi := uint32(sitter.MIN_COMPATIBLE_LANGUAGE_VERSION); abi <= sitter.LANGUAGE_VERSION; abi++ {
		if err := checkABI("g", abi); err != nil {
			t.Errorf("ABI %d: %v", abi, err)
		}
	}
}
