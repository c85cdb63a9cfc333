package docker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// An engine that lists no runsc gets a gVisor create refused with what
// the operator must do; a bridge gVisor sandbox is refused before the
// engine is asked.
func TestGVisorNeedsTheEnginesRunsc(t *testing.T) {
	asked := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info") {
			http.NotFound(w, r)
			return
		}
		asked++
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"Runtimes": {"runc": {"path": "runc"}}}`))
	}))
	t.Cleanup(srv.Close)
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+strings.TrimPrefix(srv.URL, "http://")), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{cli: cli, gvisorRuntime: DefaultGVisorRuntime}
	ctx := context.Background()

	err = b.checkRuntime(ctx, sandbox.Spec{Runtime: sandbox.RuntimeGVisor, Network: "bridge"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `cannot have network "bridge"`) || asked != 0 {
		t.Errorf("bridge: %v (engine asked %d times), want invalid_argument before asking", err, asked)
	}
	err = b.checkRuntime(ctx, sandbox.Spec{Runtime: sandbox.RuntimeGVisor})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), `no "runsc" runtime (it has [runc])`) || !strings.Contains(err.Error(), "scripts/setup.sh") {
		t.Errorf("no runsc: %v, want failed_precondition naming what to do", err)
	}
	if err := b.checkRuntime(ctx, sandbox.Spec{}); err != nil {
		t.Errorf("runc needs no check: %v", err)
	}
}
