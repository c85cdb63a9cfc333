package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/sandboxd/sandboxd/tools"
)

// routerReplica is a Router in front of a stand-in API that says which
// replica served a request and echoes its body.
type routerReplica struct {
	id     string
	srv    *httptest.Server
	owners *Owners
}

type fakeRuns map[string]tools.Run

func (f fakeRuns) Lookup(_ context.Context, id string) (tools.Run, bool) {
	r, ok := f[id]
	return r, ok
}

type fakeAuth struct{}

func (fakeAuth) Authenticate(tok string) (string, bool) { return "a", tok == humanToken }

func newRouterReplica(t *testing.T, ctx context.Context, cs *fake.Clientset, id string, runs fakeRuns) *routerReplica {
	t.Helper()
	return newRouterReplicaWith(t, ctx, cs, id, runs, func(context.Context, string) (Key, bool) { return Key{}, false })
}

// newRouterReplicaWith is newRouterReplica whose sandboxes are found by
// sandboxes.
func newRouterReplicaWith(t *testing.T, ctx context.Context, cs *fake.Clientset, id string, runs fakeRuns, sandboxes SandboxLookup) *routerReplica {
	t.Helper()
	return newRouterReplicaOpts(t, ctx, cs, id, runs, func(o *RouterOptions) { o.Sandboxes = sandboxes })
}

// newRouterReplicaOpts is newRouterReplica with its router's options
// changed by opts.
func newRouterReplicaOpts(t *testing.T, ctx context.Context, cs *fake.Clientset, id string, runs fakeRuns, opts func(*RouterOptions)) *routerReplica {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	rp := &routerReplica{id: id, srv: srv}
	signer, err := NewSigner([]byte(peerSecret), id)
	if err != nil {
		t.Fatal(err)
	}
	rp.owners = NewOwners(cs, Options{Namespace: qNamespace, Deployment: qDeployment,
		Self: Peer{Identity: id, URL: "http://" + srv.Listener.Addr().String()}, LeaseDuration: time.Minute, RenewInterval: time.Second})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/stream" || strings.HasSuffix(r.URL.Path, "/tools/slow") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: output\ndata: first from %s\n\n", id)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, "served by %s forwarded=%v body=%s", id, IsForwarded(r), body)
	})
	o := RouterOptions{Owners: rp.owners, Forwarder: NewForwarder(signer, nil, nil), Signer: signer,
		Runs: runs, Auth: fakeAuth{}, MaxBody: 1 << 20,
		Sandboxes: func(context.Context, string) (Key, bool) { return Key{}, false }}
	opts(&o)
	srv.Config.Handler = NewRouter(next, o)
	srv.Start()
	if err := rp.owners.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return rp
}

func post(t *testing.T, url, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+humanToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestRouterForwardsToTheOwner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	runs := fakeRuns{"run_1": {ID: "run_1", Tenant: "a", Conversation: "c1"}}
	a := newRouterReplica(t, ctx, cs, "sd-0", runs)
	b := newRouterReplica(t, ctx, cs, "sd-1", runs)

	// The first request, at a, makes a the owner.
	if code, _, body := post(t, a.srv.URL+"/v1/runs/run_1/tools/read", `{"path":"x"}`); code != 200 || !strings.Contains(body, "served by sd-0 forwarded=false") {
		t.Fatalf("at the owner: %d %s", code, body)
	}
	// At b it is forwarded to a, body and all, and marked as forwarded.
	eventually(t, "b's informer seeing a's lease", func() bool {
		_, _, body := post(t, b.srv.URL+"/v1/runs/run_1/tools/read", `{"path":"x"}`)
		return strings.Contains(body, `served by sd-0 forwarded=true body={"path":"x"}`)
	})
	if b.owners.Owned() != 0 || a.owners.Owned() != 1 {
		t.Fatalf("owned: a %d, b %d", a.owners.Owned(), b.owners.Owned())
	}
	// A run's MCP endpoint and its call log live with its calls, at the owner.
	if _, _, body := post(t, b.srv.URL+"/v1/runs/run_1/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); !strings.Contains(body, "served by sd-0 forwarded=true") {
		t.Fatalf("POST /v1/runs/run_1/mcp at b: %s", body)
	}
	calls, _ := http.NewRequest("GET", b.srv.URL+"/v1/runs/run_1/calls", nil)
	calls.Header.Set("Authorization", "Bearer "+humanToken)
	if resp, err := http.DefaultClient.Do(calls); err != nil {
		t.Fatal(err)
	} else {
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(got), "served by sd-0 forwarded=true") {
			t.Fatalf("GET /v1/runs/run_1/calls at b: %s", got)
		}
	}
	// A create call is routed by the conversation in its body.
	if _, _, body := post(t, b.srv.URL+"/v1/runs", `{"conversation":"c1"}`); !strings.Contains(body, "served by sd-0") {
		t.Fatalf("POST /v1/runs for a's conversation at b: %s", body)
	}
	// The scheme in another case is the same token to the API, and so to
	// the router: the call still goes to the owner.
	lower, _ := http.NewRequest("POST", b.srv.URL+"/v1/runs", strings.NewReader(`{"conversation":"c1"}`))
	lower.Header.Set("Authorization", "bearer "+humanToken)
	if resp, err := http.DefaultClient.Do(lower); err != nil {
		t.Fatal(err)
	} else {
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(got), "served by sd-0") {
			t.Fatalf("POST /v1/runs with a lower-case bearer scheme at b: %s", got)
		}
	}
	if _, _, body := post(t, b.srv.URL+"/v1/runs", `{"conversation":"c2"}`); !strings.Contains(body, "served by sd-1 forwarded=false") {
		t.Fatalf("POST /v1/runs for a new conversation at b: %s", body)
	}

	// A stream comes through as it is written, not when it ends.
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	req, _ := http.NewRequestWithContext(sctx, "POST", b.srv.URL+"/v1/runs/run_1/tools/slow", nil)
	req.Header.Set("Authorization", "Bearer "+humanToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	line2, _ := bufio.NewReader(resp.Body).ReadString('\n')
	_ = line2
	if !strings.Contains(line, "event: output") {
		t.Fatalf("the forwarded stream's first line: %q", line)
	}
	scancel()
	resp.Body.Close()

	// The owner dies: its lease has not expired, so b says to retry.
	a.srv.CloseClientConnections()
	a.srv.Listener.Close()
	code, h, body := post(t, b.srv.URL+"/v1/runs/run_1/tools/read", `{}`)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "cannot be reached") {
		t.Fatalf("with the owner gone: %d Retry-After=%q %s", code, h.Get("Retry-After"), body)
	}
}

func TestRouterRefusesForgedForwards(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	a := newRouterReplica(t, ctx, cs, "sd-0", fakeRuns{})
	req, _ := http.NewRequest("GET", a.srv.URL+"/v1/runs", nil)
	req.Header.Set(HeaderForwardedBy, "sd-1")
	req.Header.Set(HeaderForwardTo, "sd-0")
	req.Header.Set(HeaderForwardTime, fmt.Sprint(time.Now().UnixMilli()))
	req.Header.Set(HeaderForwardSig, "forged")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "signature does not match") {
		t.Fatalf("a forged forward: %d %s", resp.StatusCode, body)
	}
}

// BenchmarkForwardHop measures what a forward adds in isolation: the same
// small call to the owner's Router directly, and through a second
// replica's Router (verify, route, sign, proxy over loopback, verify
// again), with a stand-in API that responds at once.
func BenchmarkForwardHop(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	runs := fakeRuns{"run_1": {ID: "run_1", Tenant: "a", Conversation: "c1"}}
	t := &testing.T{}
	owner := newRouterReplica(t, ctx, cs, "sd-0", runs)
	other := newRouterReplica(t, ctx, cs, "sd-1", runs)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(url string) {
		req, _ := http.NewRequest("POST", url+"/v1/runs/run_1/tools/read", strings.NewReader(`{"path":"x"}`))
		req.Header.Set("Authorization", "Bearer "+humanToken)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	call(owner.srv.URL) // sd-0 takes the conversation
	for i := 0; i < 200 && other.owners.HeldBy(Key{"a", "c1"}, "sd-0") == false; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			call(owner.srv.URL)
		}
	})
	b.Run("forwarded", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			call(other.srv.URL)
		}
	})
}
