package sandboxtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// Open starts a Manager on b and creates one sandbox of image for
// conversation "c1" of a fresh tenant named after prefix; the sandbox is
// deleted and the Manager closed when the test ends. Tool harnesses use it
// to stand on a real sandbox as serve would wire one.
func Open(t *testing.T, b sandbox.Backend, prefix, image string) (m *sandbox.Manager, tenant string, info sandbox.Info) {
	t.Helper()
	return OpenSpec(t, b, prefix, sandbox.Spec{Image: image})
}

// OpenSpec is Open with the sandbox made from spec (its tenant and
// conversation are set here), e.g. one whose workspace is a host directory.
func OpenSpec(t *testing.T, b sandbox.Backend, prefix string, spec sandbox.Spec) (m *sandbox.Manager, tenant string, info sandbox.Info) {
	t.Helper()
	m = sandbox.NewManager(b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tenant = fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
	spec.Tenant, spec.Conversation = tenant, "c1"
	info, err := m.Create(ctx, spec)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Delete(c, tenant, info.ID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		m.Close()
	})
	return m, tenant, info
}
