package runstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/tools"
)

// A store on the same file after a restart serves the same top-level runs
// with their settings; deleted, expired and child runs stay gone.
func TestRunFileRestoresRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	clk := &clock{t: time.Unix(1000, 0)}
	var saveErrs []error
	s := New(WithFile(path, func(err error) { saveErrs = append(saveErrs, err) }), WithClock(clk.now), WithTTL(time.Hour))
	if n, err := s.Load(); n != 0 || err != nil {
		t.Fatalf("Load without a file = %d, %v; want nothing and no error", n, err)
	}
	kept, _ := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c1", Surface: "code", Workdir: "src", Space: "sp", Approval: "ask", Vibe: true})
	other, _ := s.Create(t.Context(), tools.Run{Tenant: "b", Conversation: "c2", Surface: "plan"})
	child, err := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c1", Parent: kept.ID})
	if err != nil {
		t.Fatal(err)
	}
	deleted, _ := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c3"})
	if err := s.Delete(t.Context(), "a", deleted.ID); err != nil {
		t.Fatal(err)
	}
	expired, _ := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c4"})
	clk.add(50 * time.Minute)
	s.Get(t.Context(), "a", kept.ID)
	s.Get(t.Context(), "a", child.ID)
	s.Get(t.Context(), "b", other.ID)
	clk.add(20 * time.Minute) // expired has been idle 70 minutes
	if n := s.Active(); n != 3 {
		t.Fatalf("live runs = %d, want kept, its child and other", n)
	}
	if len(saveErrs) > 0 {
		t.Fatalf("saving failed: %v", saveErrs)
	}

	again := New(WithFile(path, nil), WithClock(clk.now), WithTTL(time.Hour))
	n, err := again.Load()
	if err != nil || n != 2 {
		t.Fatalf("Load = %d, %v; want the 2 live top-level runs", n, err)
	}
	got, err := again.Get(t.Context(), "a", kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got != kept {
		t.Errorf("restored run = %+v, want %+v", got, kept)
	}
	if _, err := again.Get(t.Context(), "a", other.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's restored run = %v, want not found", err)
	}
	if _, err := again.Get(t.Context(), "b", other.ID); err != nil {
		t.Errorf("tenant b's run after the restart: %v", err)
	}
	for _, id := range []string{child.ID, deleted.ID, expired.ID} {
		if _, err := again.Get(t.Context(), "a", id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("run %s came back: %v", id, err)
		}
	}
	// A restored run's TTL starts at the restart.
	clk.add(59 * time.Minute)
	if _, err := again.Get(t.Context(), "b", other.ID); err != nil {
		t.Errorf("restored run expired before its TTL: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("run file mode = %v, %v; want it private to sandboxd", fi.Mode().Perm(), err)
	}
}

// A damaged file is set aside with an error message saying where, and the
// store starts empty.
func TestRunFileDamagedIsSetAside(t *testing.T) {
	for name, content := range map[string]string{
		"not json":      "{runs: [",
		"other version": `{"version": 99, "runs": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "runs.json")
			os.WriteFile(path, []byte(content), 0o600)
			s := New(WithFile(path, nil))
			n, err := s.Load()
			if n != 0 || err == nil || !strings.Contains(err.Error(), "moved to "+path+".bad") {
				t.Fatalf("Load = %d, %v; want an error naming where the file went", n, err)
			}
			if b, _ := os.ReadFile(path + ".bad"); string(b) != content {
				t.Errorf("the set-aside file holds %q", b)
			}
			if _, err := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c"}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("no new run file after a create: %v", err)
			}
		})
	}
}

// A file that cannot be written is reported and the runs are still served.
func TestRunFileWriteFailureReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "runs.json")
	var saveErrs []error
	s := New(WithFile(path, func(err error) { saveErrs = append(saveErrs, err) }))
	r, err := s.Create(t.Context(), tools.Run{Tenant: "a", Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "a", r.ID); err != nil {
		t.Fatal(err)
	}
	if len(saveErrs) != 1 || !strings.Contains(saveErrs[0].Error(), "cannot be written") {
		t.Errorf("save errors = %v, want one saying the file cannot be written", saveErrs)
	}
}
