package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
)

// nodeServer is a Node HTTP server with a page and a download of N bytes,
// written in its standard library only.
const nodeServer = `const http = require('http');
const chunk = Buffer.alloc(1 << 16, 120);
http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/') { res.writeHead(200, {'Content-Type': 'text/html'}); res.end('<!doctype html><title>node-app</title>'); return; }
  if (u.pathname === '/big') {
    let left = Number(u.searchParams.get('n'));
    res.writeHead(200, {'Content-Type': 'application/octet-stream', 'Content-Length': String(left)});
    const more = () => { while (left > 0) { const n = Math.min(left, chunk.length); left -= n; if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) { res.once('drain', more); return; } } res.end(); };
    more(); return;
  }
  res.writeHead(404); res.end();
}).listen(8791, '127.0.0.1', () => console.log('node listening on 8791'));
`

// A Node server started as a process answers through a preview link, and a
// 100 MB download streams through with sandboxd's memory bounded (the
// body is never held whole).
func TestNodeServerAndABigDownloadThroughAPreview(t *testing.T) {
	if os.Getenv("SANDBOXD_TEST_DOCKER") != "1" {
		t.Skip("needs Docker (SANDBOXD_TEST_DOCKER=1)")
	}
	d := startDaemon(t, "docker", t.TempDir())
	sb, err := d.Client.CreateSandbox(ctx(t), api.CreateSandboxRequest{Conversation: "node", Image: dockerImage()})
	if err != nil {
		t.Fatal(err)
	}
	var p api.Process
	procHTTP(t, d, "POST", "/v1/sandboxes/"+sb.ID+"/processes", api.StartProcess{Command: "cat > /tmp/app.js <<'EOF'\n" + nodeServer + "EOF\nexec node /tmp/app.js"}, &p, http.StatusCreated)
	waitFor(t, 30*time.Second, "the Node server listens", func() error {
		var po api.ProcessOutput
		procHTTP(t, d, "GET", "/v1/sandboxes/"+sb.ID+"/processes/"+p.ID+"/output?since=0", nil, &po, http.StatusOK)
		for _, c := range po.Chunks {
			if strings.Contains(c.Text, "node listening on 8791") {
				return nil
			}
		}
		return fmt.Errorf("not yet: %+v", po.Process.Status)
	})
	pv := createPreview(t, d, sb.ID, map[string]any{"port": 8791})
	if code, body := get(t, plain(t, "GET", pv.URL)); code != 200 || !strings.Contains(body, "<title>node-app</title>") {
		t.Fatalf("the Node page through the preview: %d %.200s", code, body)
	}

	rss := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				var kb int64
				fmt.Sscan(f[1], &kb)
				return kb << 10
			}
		}
		return 0
	}
	before := rss()
	const size = 100 << 20
	resp, err := http.Get(pv.URL + "big?n=" + fmt.Sprint(size))
	if err != nil {
		t.Fatal(err)
	}
	var peak int64
	buf := make([]byte, 1<<20)
	got := int64(0)
	for {
		n, err := resp.Body.Read(buf)
		got += int64(n)
		if got%(16<<20) < int64(n) {
			peak = max(peak, rss())
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the download broke after %s: %v", bench.MiB(got), err)
		}
	}
	resp.Body.Close()
	if got != size {
		t.Fatalf("downloaded %d bytes, want %d", got, size)
	}
	// The body streams: sandboxd grows by far less than the 100 MB it carried.
	if grow := peak - before; grow > 48<<20 {
		t.Fatalf("sandboxd's RSS grew by %s during a 100 MiB download (from %s to %s); the body should stream", bench.MiB(grow), bench.MiB(before), bench.MiB(peak))
	}
	t.Logf("sandboxd RSS %s before, %s at most during a 100 MiB download", bench.MiB(before), bench.MiB(peak))
}
