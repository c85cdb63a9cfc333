package host

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// A folder from before deployments (its meta.json has no deployment label)
// is nobody's in a shared data dir, unless a deployment adopts unlabelled
// sandboxes.
func TestUnlabelledFolder(t *testing.T) {
	dir := t.TempDir()
	maker := newBackend(t, dir, WithDeployment(sandbox.Deployment{Name: "maker"}))
	info, err := maker.Create(ctx(t), sandbox.Spec{Tenant: "acme", Conversation: "old"})
	if err != nil {
		t.Fatal(err)
	}
	metaPath := filepath.Join(dir, "sandboxes", info.ID, "meta.json")
	var m meta
	data, err := os.ReadFile(metaPath)
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	if m.Labels[sandbox.LabelDeployment] != "maker" {
		t.Fatalf("meta.json labels %v lack the deployment", m.Labels)
	}
	delete(m.Labels, sandbox.LabelDeployment)
	if err := writeMeta(filepath.Dir(metaPath), m); err != nil {
		t.Fatal(err)
	}

	other := newBackend(t, dir, WithDeployment(sandbox.Deployment{Name: "other"}))
	if list, err := other.List(ctx(t)); err != nil || len(list) != 0 {
		t.Errorf("List = %+v, %v; want none", list, err)
	}
	if _, err := other.Inspect(ctx(t), info.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Inspect = %v, want not_found", err)
	}
	if n, err := other.Unlabelled(ctx(t)); err != nil || n != 1 {
		t.Errorf("Unlabelled = %d, %v; want 1", n, err)
	}
	adopter := newBackend(t, dir, WithDeployment(sandbox.Deployment{Name: "other", AdoptUnlabelled: true}))
	if list, err := adopter.List(ctx(t)); err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Errorf("List with adoption = %+v, %v; want %s", list, err, info.ID)
	}
	if err := adopter.Remove(ctx(t), info.ID); err != nil {
		t.Errorf("Remove with adoption = %v", err)
	}
}
