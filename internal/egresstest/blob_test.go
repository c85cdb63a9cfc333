package egresstest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// curl fetches /hello and a sized download, trusting the CA through
// --cacert.
func TestBlobWithCurl(t *testing.T) {
	curl := need(t, "curl")
	ca := NewCA(t)
	b := NewBlob(t, ca, "files.test")
	env := hostEnv(t)
	if got := run(t, "", env, curl, "-sS", "--fail", "--cacert", ca.PEMFile(), b.LoopbackURL()+"/hello"); got != "hello from files.test\n" {
		t.Errorf("curl /hello = %q", got)
	}
	got := run(t, "", env, curl, "-sS", "--fail", "--cacert", ca.PEMFile(), b.LoopbackURL()+"/bytes/100000")
	want := bytes.Repeat(blobChunk, 4)[:100000]
	if got != string(want) {
		t.Errorf("curl /bytes/100000 gave %d bytes, not the pattern", len(got))
	}
	ds := b.Downloads()
	if len(ds) != 1 || !ds[0].Done || ds[0].Sent != 100000 {
		t.Errorf("downloads = %+v, want one finished of 100000 bytes", ds)
	}
}

// A paced download stays open; when the client goes away the server sees
// it cut short.
func TestBlobPacedDownloadCut(t *testing.T) {
	ca := NewCA(t)
	b := NewBlob(t, ca, "files.test")
	resp, err := byName(ca, b.Server).Get(b.URL() + "/bytes/1000000?rate=20000")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := io.ReadFull(resp.Body, make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("5000 bytes at 20000/s came in %v, not paced", took)
	}
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ds := b.Downloads()
		if len(ds) == 1 && ds[0].Done {
			if ds[0].Sent >= ds[0].Size {
				t.Errorf("the cut download was sent whole: %+v", ds[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not see the download cut within 5 s: %+v", ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A plain HTTP server answers under its name without TLS.
func TestBlobPlainHTTP(t *testing.T) {
	ca := NewCA(t)
	b := NewBlob(t, ca, "plain.test", PlainHTTP())
	if !strings.HasPrefix(b.URL(), "http://plain.test:") {
		t.Fatalf("URL = %s, want http://plain.test:PORT", b.URL())
	}
	resp, err := byName(ca, b.Server).Get(b.URL() + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hello from plain.test\n" {
		t.Errorf("GET /hello = %s %q", resp.Status, body)
	}
	if r := b.Requests(); len(r) != 1 || r[0].Host != b.HostPort() || r[0].TLSServer != "" {
		t.Errorf("recorded %+v, want one request to %s without TLS", r, b.HostPort())
	}
}
