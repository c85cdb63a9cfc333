package api

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// Output is text, and a character cut between two chunks of bytes is
// never cut in the text: it waits for the next chunk of its stream, and the
// offsets stay those of the bytes.
func TestUTF8CarryKeepsCharactersWhole(t *testing.T) {
	data := []byte("héllo wörld ✓ done")
	for split := 1; split < len(data); split++ {
		var u utf8Carry
		var got strings.Builder
		for _, ch := range []proto.ProcChunk{{Stream: "pty", Offset: 100, Data: data[:split]}, {Stream: "pty", Offset: 100 + int64(split), Data: data[split:]}} {
			for _, oc := range u.chunk(ch) {
				if !strings.HasPrefix(string(data), got.String()) {
					t.Fatalf("split %d: text %q is not a prefix of the output", split, got.String())
				}
				if want := 100 + int64(got.Len()); oc.Offset != want {
					t.Fatalf("split %d: chunk at offset %d, want %d", split, oc.Offset, want)
				}
				got.WriteString(oc.Text)
			}
		}
		if got.String() != string(data) || strings.ContainsRune(got.String(), '\uFFFD') {
			t.Fatalf("split %d: got %q", split, got.String())
		}
	}
	// A cut character followed by another stream is given up, marked.
	var u utf8Carry
	out := append(u.chunk(proto.ProcChunk{Stream: "stdout", Offset: 0, Data: []byte("a\xc3")}), u.chunk(proto.ProcChunk{Stream: "stderr", Offset: 2, Data: []byte("b")})...)
	if len(out) != 3 || out[0].Text != "a" || out[1].Text != "\uFFFD" || out[1].Offset != 1 || out[2].Text != "b" {
		t.Fatalf("a cut character before another stream: %+v", out)
	}
}
