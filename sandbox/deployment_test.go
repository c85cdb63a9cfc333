package sandbox

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestValidateDeployment(t *testing.T) {
	for _, ok := range []string{"a", "prod-eu", "dir-0123456789ab", strings.Repeat("x", MaxDeploymentLen)} {
		if err := ValidateDeployment(ok); err != nil {
			t.Errorf("ValidateDeployment(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "a-", "Prod", "a_b", "a.b", "a b", strings.Repeat("x", MaxDeploymentLen+1), "ä"} {
		err := ValidateDeployment(bad)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "lower-case letters") {
			t.Errorf("ValidateDeployment(%q) = %v, want invalid_argument saying what is allowed", bad, err)
		}
	}
}

func TestDeploymentForDataDir(t *testing.T) {
	dir := t.TempDir()
	a, err := DeploymentForDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateDeployment(a); err != nil {
		t.Fatalf("the default name %q is not a valid name: %v", a, err)
	}
	again, _ := DeploymentForDataDir(dir + "/./")
	if again != a {
		t.Errorf("the same data dir named %q and %q", a, again)
	}
	// A symlink to the data dir is the same data dir.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err == nil {
		if l, _ := DeploymentForDataDir(link); l != a {
			t.Errorf("a symlink to the data dir names %q, the dir %q", l, a)
		}
	}
	other, _ := DeploymentForDataDir(t.TempDir())
	if other == a {
		t.Errorf("two data dirs share the deployment name %q", a)
	}
}

func TestDeploymentOwns(t *testing.T) {
	d := Deployment{Name: "a"}
	cases := []struct {
		labels     map[string]string
		own, adopt bool
	}{
		{map[string]string{LabelDeployment: "a"}, true, true},
		{map[string]string{LabelDeployment: "b"}, false, false},
		{map[string]string{}, false, true},
		{nil, false, true},
	}
	for _, c := range cases {
		if got := d.Owns(c.labels); got != c.own {
			t.Errorf("Owns(%v) = %v, want %v", c.labels, got, c.own)
		}
		d2 := d
		d2.AdoptUnlabelled = true
		if got := d2.Owns(c.labels); got != c.adopt {
			t.Errorf("with AdoptUnlabelled, Owns(%v) = %v, want %v", c.labels, got, c.adopt)
		}
	}
}

// The fake lists every deployment's boxes, so this proves the Manager's own
// filter: another deployment's sandbox is never listed, looked up, counted,
// deleted or reaped, and its conversation is free here.
func TestManagerSeesOnlyItsDeployment(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	other := f.addLabelled("acme", "conv", map[string]string{LabelManaged: "true", LabelDeployment: "other"})
	legacy := f.addLabelled("acme", "old", map[string]string{LabelManaged: "true"})
	m := startManager(t, f, WithIdleTTL(time.Hour), WithClock(clock))
	ctx := testCtx(t)

	if list, err := m.List(ctx, "acme", ""); err != nil || len(list) != 0 {
		t.Fatalf("List = %+v, %v; want none of another deployment's or unlabelled", list, err)
	}
	for _, conv := range []string{"conv", "old"} {
		if _, err := m.Lookup(ctx, "acme", conv); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Lookup(%s) = %v, want not_found", conv, err)
		}
		if _, _, err := m.Agent(ctx, "acme", conv); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Agent(%s) = %v, want not_found", conv, err)
		}
	}
	for _, id := range []string{other, legacy} {
		if _, err := m.Get(ctx, "acme", id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Get(%s) = %v, want not_found", id, err)
		}
		if err := m.Delete(ctx, "acme", id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Delete(%s) = %v, want not_found", id, err)
		}
	}
	mine, err := m.Create(ctx, Spec{Tenant: "acme", Conversation: "conv"})
	if err != nil {
		t.Fatalf("Create of a conversation another deployment has = %v, want a sandbox of our own", err)
	}
	if mine.ID == other || mine.Deployment != "fake" {
		t.Fatalf("Create = %+v", mine)
	}
	if c := m.Counts(); c[StateRunning] != 1 {
		t.Errorf("Counts = %v, want 1 running (ours only)", c)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	m.reap(ctx)
	if _, err := f.Inspect(ctx, mine.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("our idle sandbox survived reaping: %v", err)
	}
	for _, id := range []string{other, legacy} {
		if _, err := f.Inspect(ctx, id); err != nil {
			t.Errorf("reaping removed %s, not ours: %v", id, err)
		}
	}
}

func TestAdoptUnlabelled(t *testing.T) {
	f := newFake(t)
	f.dep.AdoptUnlabelled = true
	legacy := f.addLabelled("acme", "old", map[string]string{LabelManaged: "true"})
	f.addLabelled("acme", "conv", map[string]string{LabelManaged: "true", LabelDeployment: "other"})
	m := startManager(t, f)
	ctx := testCtx(t)
	got, err := m.Lookup(ctx, "acme", "old")
	if err != nil || got.ID != legacy {
		t.Fatalf("Lookup of an unlabelled sandbox with AdoptUnlabelled = %+v, %v; want %s", got, err, legacy)
	}
	if _, err := m.Lookup(ctx, "acme", "conv"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Lookup of another deployment's with AdoptUnlabelled = %v, want not_found", err)
	}
	if err := m.Delete(ctx, "acme", legacy); err != nil {
		t.Errorf("Delete of an adopted sandbox = %v", err)
	}
}

// A deployment that leaves unlabelled sandboxes alone says so at start-up,
// with how to adopt them; one that adopts them does not.
func TestUnlabelledSandboxesNoted(t *testing.T) {
	f := newFake(t)
	f.addLabelled("acme", "old", map[string]string{LabelManaged: "true"})
	var logs strings.Builder
	startManager(t, f, WithLogger(slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))))
	if !strings.Contains(logs.String(), "adopt_unlabelled_sandboxes") || !strings.Contains(logs.String(), "count=1") {
		t.Errorf("start-up log %q does not note the unlabelled sandbox", logs.String())
	}
	f.dep.AdoptUnlabelled = true
	logs.Reset()
	startManager(t, f, WithLogger(slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))))
	if strings.Contains(logs.String(), "adopt_unlabelled_sandboxes") {
		t.Errorf("an adopting deployment warned: %q", logs.String())
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
