package tools

import (
	"context"
	"strings"
	"unicode/utf8"
)

// The streams an OutputSink is told about.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// OutputSink receives a call's output while the call runs, for a caller
// that shows it live (the API's text/event-stream response). It is an
// optional capability: a tool that produces output over time feeds the
// sink it finds in its context, every other tool ignores it, and the
// call's Result is the same either way — the sink only sees it sooner.
//
// Output must not block: a sink that cannot keep up drops text (and says
// so) rather than hold the tool. It may be called from any goroutine, but
// one tool calls it from one goroutine at a time so text keeps its order.
type OutputSink interface {
	Output(stream, text string)
}

type sinkKey struct{}

// WithOutputSink returns ctx carrying s; a nil s returns ctx unchanged.
func WithOutputSink(ctx context.Context, s OutputSink) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, sinkKey{}, s)
}

// OutputSinkFrom returns the sink in ctx, or nil when the caller wants no
// live output.
func OutputSinkFrom(ctx context.Context) OutputSink {
	s, _ := ctx.Value(sinkKey{}).(OutputSink)
	return s
}

// EmitOutput gives text to ctx's sink, if there is one: the one line a tool
// needs to stream.
func EmitOutput(ctx context.Context, stream, text string) {
	if text == "" {
		return
	}
	if s := OutputSinkFrom(ctx); s != nil {
		s.Output(stream, text)
	}
}

// UTF8Chunker turns a byte stream that arrives in pieces into text for a
// sink without cutting a character in two: an incomplete sequence at a
// piece's end waits for the next piece. Invalid bytes become U+FFFD. The
// zero value is ready; one per stream.
type UTF8Chunker struct {
	carry []byte // at most utf8.UTFMax-1 bytes of an unfinished character
}

// Next returns the text that b completes.
func (c *UTF8Chunker) Next(b []byte) string {
	if len(c.carry) > 0 {
		b = append(c.carry, b...)
		c.carry = nil
	}
	// Find where a trailing, still incomplete sequence starts.
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	c.carry = append(c.carry, b[cut:]...)
	return strings.ToValidUTF8(string(b[:cut]), "\uFFFD")
}
