package eval

import (
	"strings"
	"testing"
)

func TestOutputKeepsOrderAndCapsEachStream(t *testing.T) {
	o := newOutput(100, 1000, 1)
	o.stream("stdout", "a\n")
	o.display(map[string]string{"text/plain": "plain", "text/markdown": "| md |"})
	o.stream("stderr", "warn\n")
	o.display(map[string]string{"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="})
	o.display(map[string]string{"text/plain": "<Figure 2>", "image/png": "iVBORw0KGgo="})
	o.stream("stdout", strings.Repeat("x", 500)+"END")
	bl := o.finish()
	if bl[0].Text != "a\n" || bl[1].Text != "| md |" || bl[2].Text != "[stderr]\nwarn\n" || bl[3].Type != "image" {
		t.Fatalf("order or markdown preference lost: %+v", bl[:4])
	}
	tail := bl[4].Text
	if !strings.Contains(tail, "bytes of stdout omitted (505 in all") || !strings.HasSuffix(tail, "END") {
		t.Fatalf("stdout not capped head and tail: %q", tail)
	}
	if n := strings.Count(tail, "x"); n > 100 {
		t.Fatalf("%d bytes of x kept, cap is 100 per stream", n)
	}
	if last := bl[len(bl)-1].Text; !strings.Contains(last, "1 more images omitted") {
		t.Fatalf("dropped image not reported: %q", last)
	}
}

// stderr is told from stdout by blocks of its own, in the order written.
func TestOutputMarksStderr(t *testing.T) {
	o := newOutput(1000, 1000, 1)
	o.stream("stdout", "one\n")
	o.stream("stderr", "warning: two\n")
	o.stream("stderr", "three\n")
	o.stream("stdout", "four\n")
	bl := o.finish()
	var got []string
	for _, b := range bl {
		got = append(got, b.Text)
	}
	want := []string{"one\n", "[stderr]\nwarning: two\nthree\n", "four\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("blocks %q, want %q", got, want)
	}
}

func TestOutputCutsOnRuneBoundaries(t *testing.T) {
	o := newOutput(10, 1000, 1)
	o.stream("stdout", strings.Repeat("é", 50))
	for _, b := range o.finish() {
		if !strings.Contains(b.Text, "omitted") && strings.ContainsRune(b.Text, '\uFFFD') {
			t.Fatalf("a character was split: %q", b.Text)
		}
		for _, part := range strings.Split(b.Text, "\n") {
			if !strings.HasPrefix(part, "[") && strings.Trim(part, "é") != "" {
				t.Fatalf("broken UTF-8 in %q", part)
			}
		}
	}
}

// A chart's text comes right after its image, and stays when the image is
// over the cap (a reader without vision still learns what it showed).
func TestOutputChartTextBesideImage(t *testing.T) {
	o := newOutput(1000, 1000, 1)
	o.display(map[string]string{"text/plain": "<Figure 1>", "image/png": "iVBORw0KGgo=", chartMime: "[chart]\naxes: \"one\""})
	o.display(map[string]string{"text/plain": "<Figure 2>", "image/png": "iVBORw0KGgo=", chartMime: "[chart]\naxes: \"two\""})
	o.display(map[string]string{"text/plain": "<Figure 3>", "image/png": "iVBORw0KGgo="})
	bl := o.finish()
	var got []string
	for _, b := range bl {
		got = append(got, b.Type+":"+b.Text)
	}
	want := []string{"image:", "text:[chart]\naxes: \"one\"", "text:[chart]\naxes: \"two\"", "text:[2 more images omitted; show fewer figures per cell]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("blocks %q, want %q", got, want)
	}
}
