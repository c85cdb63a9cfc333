package egress

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowDownload streams a chunk every 20ms for a minute.
func slowDownload(w http.ResponseWriter, r *http.Request) {
	fl := w.(http.Flusher)
	chunk := strings.Repeat("x", 1024)
	for range 3000 {
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestSetPolicyCutsOpenDownload removes the host while a download from it
// runs: the download is cut within a second, the next CONNECT is refused,
// and the cut is recorded.
func TestSetPolicyCutsOpenDownload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []Secret
		kind    string
	}{{"tunnel", nil, "connect"}, {"intercepted", []Secret{bearer("pypi.test")}, "intercept"}} {
		t.Run(tc.name, func(t *testing.T) {
			_, port := tlsServer(t, http.HandlerFunc(slowDownload))
			f := newFixture(t, baseConfig(t), mustLayered(t, "pypi.test", "other.test", "127.0.0.0/8"), tc.secrets)
			up, ca := authorities(t)
			c, _ := f.client(up, ca)
			resp, err := c.Get(fmt.Sprintf("https://pypi.test:%d/big", port))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if _, err := io.ReadFull(resp.Body, make([]byte, 4096)); err != nil {
				t.Fatalf("the download did not start: %v", err)
			}
			cutAt := time.Now()
			f.gate.SetPolicy(mustLayered(t, "other.test", "127.0.0.0/8"))
			done := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, resp.Body)
				done <- err
			}()
			select {
			case <-done:
				if el := time.Since(cutAt); el > time.Second {
					t.Errorf("the download was cut %s after the policy change, want within 1s", el)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the download still ran 5s after the policy removed its host")
			}
			d := f.waitDecision(func(d Decision) bool {
				return d.Kind == tc.kind && strings.HasPrefix(d.Reason, "cut by a policy change")
			})
			if d.Allowed || d.BytesDown < 4096 {
				t.Errorf("cut decision %+v, want refused with the bytes so far", d)
			}
			resp2, body, _, _ := f.rawRequest(fmt.Sprintf("CONNECT pypi.test:%d HTTP/1.1\r\n\r\n", port))
			checkRefusal(t, resp2, body, 403, fmt.Sprintf("sandboxd: egress to pypi.test:%d is not allowed for this sandbox; allowed: other.test. Ask the operator to add it.", port))
			if p := f.gate.Policy(); p.Host("pypi.test", port).Allowed {
				t.Error("Policy() still allows the removed host")
			}
		})
	}
}
