package cluster

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxd/sandboxd/api"
)

// The E2B API's calls reach the replica owning the sandbox they name, by
// the id in the path, in the E2b-Sandbox-Id header or in the host name;
// its creates and listings are served where they arrive.
func TestRouterSendsE2BCallsToTheOwner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	k := Key{Tenant: "a", Conversation: "e2b-1"}
	runs := fakeRuns{"run_1": {ID: "run_1", Tenant: "a", Conversation: "e2b-1"}}
	opts := func(o *RouterOptions) {
		o.Sandboxes = func(_ context.Context, id string) (Key, bool) { return k, id == "sb1" }
		// The daemon's lookup: {port}-{id}.sb.test.
		o.Hosts = func(r *http.Request) (string, bool) {
			label, ok := strings.CutSuffix(r.Host, ".sb.test")
			_, id, dash := strings.Cut(label, "-")
			return id, ok && dash
		}
	}
	a := newRouterReplicaOpts(t, ctx, cs, "sd-0", runs, opts)
	b := newRouterReplicaOpts(t, ctx, cs, "sd-1", runs, opts)
	if code, _, body := post(t, a.srv.URL+"/v1/runs/run_1/tools/read", `{}`); code != 200 || !strings.Contains(body, "served by sd-0") {
		t.Fatalf("a taking the conversation: %d %s", code, body)
	}
	eventually(t, "b's informer seeing a's lease", func() bool { return b.owners.HeldBy(k, "sd-0") })

	atOwner, here := "served by sd-0 forwarded=true", "served by sd-1 forwarded=false"
	for _, tc := range []struct {
		method, path, host, header, want string
	}{
		{"GET", "/e2b/sandboxes/sb1", "", "", atOwner},
		{"DELETE", "/e2b/sandboxes/sb1", "", "", atOwner},
		{"POST", "/e2b/sandboxes/sb1/timeout", "", "", atOwner},
		{"POST", "/e2b/sandboxes/sb1/connect", "", "", atOwner},
		{"POST", "/e2b/v2/sandboxes/sb1/connect", "", "", atOwner},
		{"GET", "/e2b/sandboxes/sb1/metrics", "", "", atOwner},
		{"POST", "/e2b/sandbox/process.Process/Start", "", "sb1", atOwner},
		{"GET", "/e2b/sandbox/files", "", "sb1", atOwner},
		{"GET", "/e2b/sandbox", "", "sb1", atOwner},
		{"GET", "/", "8080-sb1.sb.test", "", atOwner},
		{"POST", "/e2b/sandbox/process.Process/Start", "49983-sb1.sb.test", "", atOwner},
		// Creates, listings, health: no sandbox yet, or every sandbox.
		{"POST", "/e2b/sandboxes", "", "", here},
		{"POST", "/e2b/v2/sandboxes", "", "", here},
		{"GET", "/e2b/v2/sandboxes", "", "", here},
		{"GET", "/e2b/sandboxes", "", "", here},
		{"GET", "/e2b/health", "", "", here},
		{"GET", "/e2b/snapshots", "", "", here},
		// What names no sandbox the router knows is the API's to answer.
		{"POST", "/e2b/sandbox/process.Process/Start", "", "", here},
		{"POST", "/e2b/sandbox/process.Process/Start", "", "sb2", here},
		{"GET", "/e2b/sandboxes/sb2", "", "", here},
		{"GET", "/", "8080-sb2.sb.test", "", here},
	} {
		req, err := http.NewRequestWithContext(ctx, tc.method, b.srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.header != "" {
			req.Header.Set(api.SandboxHeader, tc.header)
		}
		req.Header.Set("X-API-KEY", "e2b key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if !strings.Contains(string(got), tc.want) {
			t.Errorf("%s %s (host %q, %s %q) at sd-1: %d %q; want %q", tc.method, tc.path, tc.host, api.SandboxHeader, tc.header, resp.StatusCode, got, tc.want)
		}
	}
}
