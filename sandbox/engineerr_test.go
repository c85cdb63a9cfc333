package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestEngineErrClassesAndSentences(t *testing.T) {
	own := errors.New("client: cannot connect")
	e := Engine{Name: "the engine", Hint: "ENGINE_HOST", Unreachable: func(err error) bool { return errors.Is(err, own) }}
	for _, tc := range []struct {
		err   error
		class error
		says  string
	}{
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), errdefs.ErrUnavailable, "check ENGINE_HOST"},
		{own, errdefs.ErrUnavailable, "cannot be reached to start sandbox x"},
		{context.DeadlineExceeded, errdefs.ErrDeadlineExceeded, "did not start sandbox x in time"},
		{cerrdefs.ErrNotFound, errdefs.ErrNotFound, "could not start sandbox x"},
		{cerrdefs.ErrAlreadyExists, errdefs.ErrConflict, "conflict"},
		{cerrdefs.ErrInvalidArgument, errdefs.ErrInvalidArgument, "refused to start sandbox x"},
		{errors.New("boom"), errdefs.ErrInternal, "failed to start sandbox x: boom"},
	} {
		got := e.Err("start sandbox x", tc.err)
		if !errors.Is(got, tc.class) || !strings.Contains(got.Error(), tc.says) {
			t.Errorf("Err(%v) = %q (%s), want class %v saying %q", tc.err, got, errdefs.Code(got), tc.class, tc.says)
		}
	}
	if e.Err("x", nil) != nil {
		t.Error("a nil error was classified")
	}
}
