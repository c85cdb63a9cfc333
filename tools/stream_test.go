package tools

import (
	"context"
	"testing"
)

type recSink struct{ got []string }

func (r *recSink) Output(stream, text string) { r.got = append(r.got, stream+":"+text) }

func TestOutputSinkInContext(t *testing.T) {
	ctx := context.Background()
	EmitOutput(ctx, StreamStdout, "nobody listens") // no sink: nothing happens
	if OutputSinkFrom(ctx) != nil || WithOutputSink(ctx, nil) != ctx {
		t.Fatal("a context without a sink must have none")
	}
	s := &recSink{}
	ctx = WithOutputSink(ctx, s)
	EmitOutput(ctx, StreamStderr, "")
	EmitOutput(ctx, StreamStderr, "warn")
	if len(s.got) != 1 || s.got[0] != "stderr:warn" {
		t.Fatalf("sink got %q", s.got)
	}
}

func TestUTF8ChunkerKeepsCharactersWhole(t *testing.T) {
	var c UTF8Chunker
	word := []byte("héllo €") // é is 2 bytes, € is 3
	var out string
	for _, b := range word {
		out += c.Next([]byte{b})
	}
	if out != "héllo €" {
		t.Fatalf("byte by byte: %q", out)
	}
	if got := c.Next([]byte{0xff, 'a'}); got != "\uFFFDa" {
		t.Fatalf("invalid byte: %q", got)
	}
	if got := c.Next([]byte{0xe2, 0x82}); got != "" {
		t.Fatalf("an unfinished character must wait: %q", got)
	}
	if got := c.Next([]byte{0xac, '!'}); got != "€!" {
		t.Fatalf("finished: %q", got)
	}
}
