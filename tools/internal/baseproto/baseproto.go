// Package baseproto is the framing that the Language Server Protocol and
// the Debug Adapter Protocol share: header lines ending in CRLF, a blank
// line, then Content-Length bytes of JSON.
package baseproto

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxHeaderLine caps one header line; real headers are a few dozen bytes.
const maxHeaderLine = 1024

const lengthHeader = "content-length:"

// Read reads one message body of at most max bytes. The Content-Length
// header is found anywhere in its line, so a stream joined in the middle of
// a message (a re-attach after a restart) resynchronises at the next
// header; other headers (Content-Type) are ignored, and stray blank lines
// between messages are tolerated.
func Read(br *bufio.Reader, max int) ([]byte, error) {
	length := -1
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if len(line) > maxHeaderLine {
			return nil, fmt.Errorf("a header line is longer than %d bytes", maxHeaderLine)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if length < 0 {
				continue
			}
			break
		}
		i := strings.Index(strings.ToLower(line), lengthHeader)
		if i < 0 {
			continue
		}
		value := strings.TrimSpace(line[i+len(lengthHeader):])
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad Content-Length %q", value)
		}
		if n > max {
			return nil, fmt.Errorf("a message of %d bytes is over the %d byte cap", n, max)
		}
		length = n
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	return body, nil
}

// Append appends body, framed, to dst and returns the result: one buffer,
// so a frame goes out in one write.
func Append(dst, body []byte) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}
