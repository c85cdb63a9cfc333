package baseproto

import (
	"bufio"
	"strings"
	"testing"
)

func TestRoundTripAndResync(t *testing.T) {
	var stream []byte
	stream = append(stream, "tail of a message cut by a re-attach}"...)
	stream = Append(stream, []byte(`{"a":1}`))
	stream = append(stream, "\r\n"...) // a stray blank line
	stream = append(stream, "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 7\r\n\r\n{\"b\":2}"...)
	br := bufio.NewReader(strings.NewReader(string(stream)))
	for _, want := range []string{`{"a":1}`, `{"b":2}`} {
		got, err := Read(br, 1<<20)
		if err != nil || string(got) != want {
			t.Fatalf("Read = %q, %v; want %q", got, err, want)
		}
	}
}

func TestRefusals(t *testing.T) {
	for name, in := range map[string]string{
		"over the cap":      "Content-Length: 100\r\n\r\n",
		"negative":          "Content-Length: -1\r\n\r\n",
		"not a number":      "Content-Length: ten\r\n\r\n",
		"header line flood": strings.Repeat("x", 2000) + "\r\n",
		"body cut short":    "Content-Length: 9\r\n\r\n{}",
	} {
		if _, err := Read(bufio.NewReader(strings.NewReader(in)), 50); err == nil {
			t.Errorf("%s: Read accepted %q", name, in)
		}
	}
}
