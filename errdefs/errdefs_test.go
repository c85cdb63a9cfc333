package errdefs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestClassesSurviveWrappingAndTheWire(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{InvalidArgument("argument %q is bad", "x"), "invalid_argument"},
		{NotFound("no run %s", "r1"), "not_found"},
		{fmt.Errorf("opening: %w", Conflict("taken")), "conflict"},
		{Unavailable("engine away: %w", errors.New("dial")), "unavailable"},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), "deadline_exceeded"},
		{errors.New("plain"), "internal"},
	} {
		if got := Code(tc.err); got != tc.code {
			t.Errorf("Code(%v) = %q, want %q", tc.err, got, tc.code)
		}
		back := FromCode(Code(tc.err), tc.err.Error())
		if Code(back) != tc.code || back.Error() != tc.err.Error() {
			t.Errorf("FromCode round trip of %v = %v (%s)", tc.err, back, Code(back))
		}
	}
}

func TestMessageIsTheSentenceAndCauseIsKept(t *testing.T) {
	cause := errors.New("connection refused")
	err := Unavailable("the engine cannot be reached (%w); start it and retry", cause)
	if err.Error() != "the engine cannot be reached (connection refused); start it and retry" {
		t.Fatalf("message = %q", err.Error())
	}
	if !errors.Is(err, cause) || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInternal) {
		t.Fatalf("errors.Is on %v: cause %v, class %v", err, errors.Is(err, cause), errors.Is(err, ErrUnavailable))
	}
	if Code(nil) != "" {
		t.Fatal("Code(nil) is not empty")
	}
	if Code(FromCode("no_such_code", "x")) != "internal" {
		t.Fatal("an unknown wire code is not internal")
	}
}
