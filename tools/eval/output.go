package eval

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/tools"
)

// output assembles a cell's output into content blocks in the order the
// cell produced it: stream text is merged into text blocks (stderr in
// blocks of its own that start with stderrMark, so a reader tells it from
// stdout), a display
// becomes a text block (markdown when the object offers it) or an image
// block. Each stream keeps its first half-cap bytes in place and its last
// half-cap bytes at the end, with a note of what was cut between.
type output struct {
	streamCap  int
	displayCap int
	maxImages  int

	blocks  []tools.Block
	text    strings.Builder // pending text, not yet a block
	cur     string          // the stream the pending text is of
	streams map[string]*capped
	images  int
	dropped int // images over maxImages
}

// capped is one stream's head/tail accounting.
type capped struct {
	headLeft int
	tail     []byte // the last bytes past the head (at most tailCap)
	tailCap  int
	total    int64
	cut      int64 // bytes dropped between head and tail
}

// stderrMark starts every block of stderr text.
const stderrMark = "[stderr]\n"

// switchTo makes the pending text name's: a change of stream ends the
// block, and a stderr block starts with its mark.
func (o *output) switchTo(name string) {
	if o.cur != name {
		o.flushText()
		o.cur = name
	}
	if o.text.Len() == 0 && name == "stderr" {
		o.text.WriteString(stderrMark)
	}
}

func newOutput(streamCap, displayCap, maxImages int) *output {
	return &output{streamCap: streamCap, displayCap: displayCap, maxImages: maxImages, streams: map[string]*capped{}}
}

func (o *output) stream(name, s string) {
	if s == "" {
		return
	}
	if name != "stderr" {
		name = "stdout"
	}
	c := o.streams[name]
	if c == nil {
		c = &capped{headLeft: o.streamCap / 2, tailCap: o.streamCap - o.streamCap/2}
		o.streams[name] = c
	}
	c.total += int64(len(s))
	if c.headLeft > 0 {
		n := min(len(s), c.headLeft)
		// Keep whole UTF-8 characters in the head.
		for n < len(s) && n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		if n > 0 {
			o.switchTo(name)
			o.text.WriteString(s[:n])
		}
		c.headLeft -= n
		if n == len(s) {
			return
		}
		c.headLeft = 0
		s = s[n:]
	}
	c.tail = append(c.tail, s...)
	if over := len(c.tail) - c.tailCap; over > 0 {
		c.cut += int64(over)
		c.tail = c.tail[over:]
	}
}

func (o *output) flushText() {
	if o.text.Len() > 0 {
		o.blocks = append(o.blocks, tools.Block{Type: "text", Text: o.text.String()})
		o.text.Reset()
	}
}

// chartMime is the kernel's text account of a chart (titles, axes, series),
// sent beside its PNG: it becomes a text block after the image, and stays
// when the image is over the cap, for a reader that cannot see images.
const chartMime = "text/x-sandboxd-chart"

func (o *output) display(data map[string]string) {
	for _, mime := range []string{"image/png", "image/jpeg"} {
		if b64, ok := data[mime]; ok && validBase64(b64) {
			o.flushText()
			if o.images >= o.maxImages {
				o.dropped++
			} else {
				o.images++
				o.blocks = append(o.blocks, tools.Block{Type: "image", MimeType: mime, Data: b64})
			}
			if chart := strings.TrimSpace(data[chartMime]); chart != "" {
				o.blocks = append(o.blocks, tools.Block{Type: "text", Text: o.capDisplay(chart)})
			}
			return
		}
	}
	text, ok := data["text/markdown"]
	if !ok {
		text = data["text/plain"]
	}
	if text == "" {
		return
	}
	o.flushText()
	o.blocks = append(o.blocks, tools.Block{Type: "text", Text: strings.TrimRight(o.capDisplay(text), "\n")})
}

// capDisplay keeps the head and tail of a display's text over displayCap.
func (o *output) capDisplay(text string) string {
	if len(text) <= o.displayCap {
		return text
	}
	half := o.displayCap / 2
	return fmt.Sprintf("%s\n[... %d bytes of this output omitted ...]\n%s", text[:half], len(text)-2*half, text[len(text)-half:])
}

func validBase64(s string) bool {
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil && s != ""
}

// blocks finishes the output: the tails of capped streams and their notes.
func (o *output) finish() []tools.Block {
	for _, name := range []string{"stdout", "stderr"} {
		c := o.streams[name]
		if c == nil || len(c.tail) == 0 {
			continue
		}
		o.switchTo(name)
		if c.cut > 0 {
			fmt.Fprintf(&o.text, "\n[... %d bytes of %s omitted (%d in all; the first and last %d kept) ...]\n", c.cut, name, c.total, o.streamCap/2)
		}
		tail := c.tail
		// Start the tail on a whole UTF-8 character.
		for len(tail) > 0 && tail[0]&0xC0 == 0x80 {
			tail = tail[1:]
		}
		o.text.Write(tail)
		c.tail = nil
	}
	o.flushText()
	if o.dropped > 0 {
		o.blocks = append(o.blocks, tools.Block{Type: "text", Text: fmt.Sprintf("[%d more images omitted; show fewer figures per cell]", o.dropped)})
	}
	return o.blocks
}
