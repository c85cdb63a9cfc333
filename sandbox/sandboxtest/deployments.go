package sandboxtest

import (
	"errors"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// deploymentsApart: two deployments on one engine, the same tenant and
// conversation in both. Each gets a sandbox of its own, and neither lists,
// looks up, counts, deletes or reaps the other's.
func (s *suite) deploymentsApart(t *testing.T) {
	blue := s.backend(t, sandbox.Deployment{Name: s.dep.Name + "-blue"})
	green := s.backend(t, sandbox.Deployment{Name: s.dep.Name + "-green"})
	mb, mg := managerOf(t, blue), managerOf(t, green)
	b := s.createIn(t, mb, "c-dep")
	g := s.createIn(t, mg, "c-dep")
	if b.ID == g.ID || b.Deployment != blue.Deployment().Name || g.Deployment != green.Deployment().Name {
		t.Fatalf("the same conversation in two deployments = %+v and %+v; want two sandboxes, each of its deployment", b, g)
	}

	// The two are two sandboxes, not one seen twice.
	cb, ib, err := mb.Agent(ctx(t), s.tenant, "c-dep")
	if err != nil {
		t.Fatal(err)
	}
	if err := cb.WriteFiles(ctx(t), &proto.WriteFilesRequest{Root: ib.Workspace, Files: []proto.WriteFile{{Path: "blue.txt", Data: []byte("blue")}}}); err != nil {
		t.Fatal(err)
	}
	cg, ig, err := mg.Agent(ctx(t), s.tenant, "c-dep")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cg.ReadFile(ctx(t), &proto.ReadFileRequest{Root: ig.Workspace, Path: "blue.txt"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("green reads blue's file: %v; want not_found", err)
	}

	for _, tc := range []struct {
		m          *sandbox.Manager
		be         sandbox.Backend
		own, other sandbox.Info
	}{{mb, blue, b, g}, {mg, green, g, b}} {
		name := tc.be.Deployment().Name
		list, err := tc.m.List(ctx(t), s.tenant, "")
		if err != nil || len(list) != 1 || list[0].ID != tc.own.ID {
			t.Errorf("%s lists %+v, %v; want only %s", name, list, err, tc.own.ID)
		}
		if infos, err := tc.be.List(ctx(t)); err != nil || hasID(infos, tc.other.ID) {
			t.Errorf("%s's backend lists the other deployment's %s (%v)", name, tc.other.ID, err)
		}
		if _, err := tc.m.Get(ctx(t), s.tenant, tc.other.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s's Get of the other's = %v, want not_found", name, err)
		}
		if err := tc.m.Delete(ctx(t), s.tenant, tc.other.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s's Delete of the other's = %v, want not_found", name, err)
		}
		if _, err := tc.be.Inspect(ctx(t), tc.other.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s's backend Inspect of the other's = %v, want not_found", name, err)
		}
		if err := tc.be.Remove(ctx(t), tc.other.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s's backend Remove of the other's = %v, want not_found", name, err)
		}
		if c := tc.m.Counts(); c[sandbox.StateRunning] != 1 {
			t.Errorf("%s counts %v, want its 1 running sandbox", name, c)
		}
	}

	// Green's idle reaper removes green's sandbox and never blue's.
	reaper := managerOf(t, green, sandbox.WithIdleTTL(200*time.Millisecond))
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := green.Inspect(ctx(t), g.ID)
		if errors.Is(err, errdefs.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("green's idle sandbox was not reaped within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	reaper.Close()
	if info, err := blue.Inspect(ctx(t), b.ID); err != nil || info.State != sandbox.StateRunning {
		t.Errorf("blue's sandbox after green reaped = %+v, %v; want it running", info, err)
	}
}

func (s *suite) createIn(t *testing.T, m *sandbox.Manager, conv string) sandbox.Info {
	t.Helper()
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: s.tenant, Conversation: conv, Image: s.cfg.image, Runtime: s.cfg.runtime})
	if err != nil {
		t.Fatalf("Create(%s): %v", conv, err)
	}
	return info
}
