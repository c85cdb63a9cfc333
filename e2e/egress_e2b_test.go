package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// e2bEgressRules: an E2B sandbox made with network rules ({host:
// [{transform: {headers}}]}) gets those headers added to its requests to
// the host by sandboxd's egress proxy, and E2B's updateNetwork replaces
// them, or clears them when it leaves rules out.
func e2bEgressRules(t *testing.T, w *egressWorld) {
	d := w.d
	e2b := func(method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx(t), method, d.URL+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", d.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode >= 300 {
			t.Logf("%s %s: %d %s", method, path, resp.StatusCode, b)
		} else if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v in %s", method, path, err, b)
			}
		}
		return resp.StatusCode
	}
	host := "blob.test"
	var made struct{ SandboxID string }
	rules := `{"` + host + `":[{"transform":{"headers":{"X-Test-Token":"e2b-transform-value-123"}}}]}`
	if code := e2b("POST", "/e2b/sandboxes", `{"templateID":"base","timeout":600,"network":{"allowOut":["`+host+`"],"rules":`+rules+`}}`, &made); code != 201 {
		t.Fatalf("create with network rules: %d", code)
	}
	t.Cleanup(func() { d.Client.DeleteSandbox(ctx(t), made.SandboxID) })
	// A rule that is not a header transform is refused with a sentence.
	if code := e2b("POST", "/e2b/sandboxes", `{"templateID":"base","network":{"rules":{"a.test":[{"transform":{"body":"x"}}]}}}`, nil); code != 400 {
		t.Errorf("a body transform: %d, want 400", code)
	}
	sb, err := d.Client.GetSandbox(ctx(t), made.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Network != "proxy" {
		t.Fatalf("a sandbox with network rules has network %q, want proxy", sb.Network)
	}
	run, err := d.Client.CreateRun(ctx(t), api.CreateRunRequest{Conversation: sb.Conversation})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, run.ID, "write", map[string]any{"path": ".sbx/test-ca.pem", "content": string(w.ca.PEM())})
	if code, out := shellOut(t, d, run.ID, `cat .sbx/test-ca.pem >> "$SSL_CERT_FILE" && cat .sbx/test-ca.pem >> /etc/ssl/certs/ca-certificates.crt`, 60); code != 0 {
		t.Fatalf("trusting the test's CA: %s", out)
	}
	headers := func() string {
		t.Helper()
		code, out := shellOut(t, d, run.ID, "curl -sS --fail "+w.blob.URL()+"/headers", 60)
		if code != 0 {
			t.Fatalf("curl of %s: %s", host, out)
		}
		return out
	}
	// The header reaches the host; a value the host sends back is kept out
	// of the sandbox, as a secret's is.
	if out := headers(); !strings.Contains(out, `"X-Test-Token":["`+strings.Repeat("*", len("e2b-transform-value-123"))+`"]`) || strings.Contains(out, "e2b-transform-value-123") {
		t.Fatalf("the rule's header did not reach %s, or its value came back:\n%s", host, out)
	}
	if code := e2b("PUT", "/e2b/sandboxes/"+made.SandboxID+"/network", `{"allowOut":["`+host+`"],"rules":{"`+host+`":[{"transform":{"headers":{"X-Other":"second-value-9"}}}]}}`, nil); code != 204 {
		t.Fatalf("updateNetwork with new rules: %d", code)
	}
	if out := headers(); !strings.Contains(out, `"X-Other":["`+strings.Repeat("*", len("second-value-9"))+`"]`) || strings.Contains(out, "X-Test-Token") {
		t.Fatalf("after updateNetwork the headers are not the new rules':\n%s", out)
	}
	if code := e2b("PUT", "/e2b/sandboxes/"+made.SandboxID+"/network", `{"allowOut":["`+host+`"]}`, nil); code != 204 {
		t.Fatalf("updateNetwork without rules: %d", code)
	}
	if out := headers(); strings.Contains(out, "X-Other") {
		t.Fatalf("updateNetwork without rules left a header:\n%s", out)
	}
}
