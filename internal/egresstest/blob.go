package egresstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxBlob is the largest download Blob makes, so that a mistyped size
// cannot run a test for hours.
const maxBlob = 4 << 30

// Blob is a server of made-up bytes, for curl, for downloads a benchmark
// measures and for downloads a test cuts:
//
//	/hello                          "hello from <name>\n"
//	/headers                        the request's headers as JSON, {"headers": {name: [values]}}
//	/bytes/<n>                      n bytes of a repeating pattern
//	/bytes/<n>?rate=<bytes/second>  the same, paced (a download that stays open)
//
// It remembers every download, how far it got and whether it finished.
type Blob struct {
	*Server
	name string // set before the server starts: its handler reads it

	mu        sync.Mutex // guards downloads
	downloads []*Download
}

// Download is one /bytes/ response as the server saw it.
type Download struct {
	Path string
	Size int64 // bytes asked for
	Sent int64 // bytes written so far
	// Done is set when the handler returned: the whole body was written
	// (Sent == Size) or the client went away, its connection cut.
	Done bool
}

// NewBlob starts a Blob server under name (for example "files.test"),
// closed at t's cleanup.
func NewBlob(t testing.TB, ca *CA, name string, opts ...Option) *Blob {
	t.Helper()
	b := &Blob{name: name}
	b.Server = start(t, ca, name, http.HandlerFunc(b.serve), opts)
	return b
}

// Downloads are the /bytes/ responses so far, oldest first (the last
// 2000).
func (b *Blob) Downloads() []Download {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Download, len(b.downloads))
	for i, d := range b.downloads {
		out[i] = *d
	}
	return out
}

// blobChunk is the pattern a download repeats.
var blobChunk = func() []byte {
	c := make([]byte, 32<<10)
	for i := range c {
		c[i] = byte(i % 251)
	}
	return c
}()

func (b *Blob) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/headers" {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]http.Header{"headers": r.Header})
		return
	}
	if r.URL.Path == "/hello" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "hello from %s\n", b.name)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bytes/")
	if !ok {
		notFound(w, r.URL.Path)
		return
	}
	size, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || size < 0 || size > maxBlob {
		http.Error(w, fmt.Sprintf("egresstest: /bytes/%s: give a size in bytes from 0 to %d", rest, int64(maxBlob)), http.StatusBadRequest)
		return
	}
	var rate int64
	if q := r.URL.Query().Get("rate"); q != "" {
		if rate, err = strconv.ParseInt(q, 10, 64); err != nil || rate <= 0 {
			http.Error(w, fmt.Sprintf("egresstest: rate=%s: give a positive number of bytes per second", q), http.StatusBadRequest)
			return
		}
	}
	d := &Download{Path: r.URL.RequestURI(), Size: size}
	b.mu.Lock()
	if len(b.downloads) >= maxRequests {
		b.downloads = append(b.downloads[:0], b.downloads[1:]...)
	}
	b.downloads = append(b.downloads, d)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		d.Done = true
		b.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	flusher, _ := w.(http.Flusher)
	begin := time.Now()
	for sent := int64(0); sent < size; {
		n := min(size-sent, int64(len(blobChunk)))
		if rate > 0 {
			n = min(n, max(rate/20, 1)) // about 20 writes a second
			// Wait until the pace allows sent+n bytes.
			due := begin.Add(time.Duration(float64(sent+n) / float64(rate) * float64(time.Second)))
			select {
			case <-time.After(time.Until(due)):
			case <-r.Context().Done():
				return
			}
		}
		if _, err := w.Write(blobChunk[:n]); err != nil {
			return
		}
		if rate > 0 && flusher != nil {
			flusher.Flush()
		}
		sent += n
		b.mu.Lock()
		d.Sent = sent
		b.mu.Unlock()
	}
}
