package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// RunPools runs the warm-pool cases against backends newBackend returns
// (which must be sandbox.Claimers): a claim carries the conversation's
// identity and its env, tools work in it, its workspace is empty and holds
// nothing of an earlier claim (files or env), the pool refills, a restarted sandboxd and another
// replica find the claimed sandbox, a pool whose image is missing says so
// while cold creates work, and two deployments' pools stay apart.
func RunPools(t *testing.T, newBackend NewBackend, opts ...Option) {
	s := &suite{t: t, newBackend: newBackend, tenant: "pool-" + randHex(4)}
	s.dep = sandbox.Deployment{Name: s.tenant}
	s.b = s.backend(t, s.dep)
	for _, o := range opts {
		o(&s.cfg)
	}
	if _, ok := s.b.(sandbox.Claimer); !ok {
		t.Fatalf("the %s backend cannot claim pool sandboxes", s.b.Name())
	}
	t.Run("ClaimRefillRestart", s.poolClaim)
	t.Run("MissingImage", s.poolMissingImage)
	t.Run("DeploymentsApart", s.poolDeployments)
}

// poolCtx allows for pods that take a while to start.
func poolCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

// poolManager starts a Manager with pools over b; its unclaimed pool
// sandboxes are removed when t ends.
func (s *suite) poolManager(t *testing.T, b sandbox.Backend, pools ...sandbox.PoolSpec) *sandbox.Manager {
	t.Helper()
	t.Cleanup(func() { removeUnclaimed(t, b) })
	return managerOf(t, b, sandbox.WithPools(pools...))
}

func removeUnclaimed(t *testing.T, b sandbox.Backend) {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	infos, err := b.List(c)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, i := range infos {
		if i.Labels[sandbox.LabelPool] != "" && i.Conversation == "" {
			if err := b.Remove(c, i.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("cleanup of pool sandbox %s: %v", i.ID, err)
			}
		}
	}
}

func poolStat(m *sandbox.Manager, image string) sandbox.PoolStat {
	for _, st := range m.PoolStats() {
		if st.Image == image {
			return st
		}
	}
	return sandbox.PoolStat{}
}

// waitReady waits until image's pool holds n warm sandboxes.
func waitReady(t *testing.T, m *sandbox.Manager, image string, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for poolStat(m, image).Ready < n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool of %s holds %+v after 3 minutes, want %d ready", image, poolStat(m, image), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *suite) poolClaim(t *testing.T) {
	img := s.cfg.image
	m := s.poolManager(t, s.b, sandbox.PoolSpec{Image: img, Size: 2})
	waitReady(t, m, img, 2)

	// The first claim asks for env: the agent sets it at the claim; and
	// for an expiry and a front end's label, which the claim stamps.
	exp := sandbox.Expiry{At: time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond), Then: sandbox.ExpirePause}
	ext := map[string]string{sandbox.LabelExtPrefix + "suite": `{"template":"pooled"}`}
	first, err := m.Create(poolCtx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-pool-1", Image: img, Env: map[string]string{"POOL_FOO": "first owner"},
		Expiry: exp, Labels: ext})
	if err != nil {
		t.Fatalf("Create (a claim): %v", err)
	}
	if first.Tenant != s.tenant || first.Conversation != "c-pool-1" || first.Labels[sandbox.LabelPool] == "" ||
		first.Deployment != s.dep.Name || first.State != sandbox.StateRunning {
		t.Fatalf("claimed sandbox = %+v; want tenant %s, conversation c-pool-1, a pool sandbox of %s", first, s.tenant, s.dep.Name)
	}
	if st := poolStat(m, img); st.Claims[sandbox.PoolClaimed] != 1 {
		t.Fatalf("pool stat after a claim = %+v, want one claimed", st)
	}
	c, info, err := m.Agent(poolCtx(t), s.tenant, "c-pool-1")
	if err != nil || info.ID != first.ID {
		t.Fatalf("Agent = %s, %v; want %s", info.ID, err, first.ID)
	}
	if ls := execIn(t, c, info.Workspace, "ls", "-A"); ls != "" {
		t.Fatalf("the claimed workspace holds %q, want it empty", ls)
	}
	if err := c.WriteFiles(poolCtx(t), &proto.WriteFilesRequest{Root: info.Workspace, Files: []proto.WriteFile{{Path: "secret.txt", Data: []byte("first owner")}}}); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	if got := execIn(t, c, info.Workspace, "cat", "secret.txt"); got != "first owner" {
		t.Fatalf("cat in the claimed sandbox = %q", got)
	}
	if got := execIn(t, c, info.Workspace, "printenv", "POOL_FOO"); got != "first owner" {
		t.Fatalf("POOL_FOO in the sandbox claimed with it = %q, want \"first owner\"", got)
	}

	waitReady(t, m, img, 2) // refilled
	other := s.tenant + "-b"
	t.Cleanup(func() { removeTenant(t, s.b, other) })
	second, err := m.Create(poolCtx(t), sandbox.Spec{Tenant: other, Conversation: "c-pool-1", Image: img})
	if err != nil {
		t.Fatalf("second claim: %v", err)
	}
	if second.ID == first.ID || second.Tenant != other || second.Labels[sandbox.LabelPool] == "" {
		t.Fatalf("second claim = %+v; want another pool sandbox for tenant %s", second, other)
	}
	c2, info2, err := m.Agent(poolCtx(t), other, "c-pool-1")
	if err != nil {
		t.Fatal(err)
	}
	if ls := execIn(t, c2, info2.Workspace, "ls", "-A"); ls != "" {
		t.Fatalf("the second claim's workspace holds %q, want nothing of the first", ls)
	}
	if env := execIn(t, c2, info2.Workspace, "sh", "-c", "echo ${POOL_FOO-unset}"); env != "unset" {
		t.Fatalf("the second claim's sandbox sees POOL_FOO=%q of the first claim's env, want it unset", env)
	}
	if got, err := m.Lookup(poolCtx(t), s.tenant, "c-pool-1"); err != nil || got.ID != first.ID {
		t.Fatalf("Lookup of the first tenant's conversation = %s, %v; want %s", got.ID, err, first.ID)
	}

	// A restarted sandboxd, and another replica, find the claim.
	m.Close()
	for name, b := range map[string]sandbox.Backend{"restarted": s.b, "replica": s.backend(t, s.dep)} {
		m2 := managerOf(t, b)
		got, err := m2.Lookup(poolCtx(t), s.tenant, "c-pool-1")
		if err != nil || got.ID != first.ID || got.Tenant != s.tenant {
			t.Fatalf("%s: Lookup = %+v, %v; want %s", name, got, err, first.ID)
		}
		if e, _, err := sandbox.ExpiryOf(got); err != nil || !e.At.Equal(exp.At) || e.Then != exp.Then ||
			sandbox.ExtLabels(got)[sandbox.LabelExtPrefix+"suite"] != ext[sandbox.LabelExtPrefix+"suite"] {
			t.Fatalf("%s: the claimed sandbox's expiry %+v (%v) and labels %v; want %+v and %v", name, e, err, sandbox.ExtLabels(got), exp, ext)
		}
		c3, info3, err := m2.Agent(poolCtx(t), s.tenant, "c-pool-1")
		if err != nil {
			t.Fatalf("%s: Agent: %v", name, err)
		}
		if got := execIn(t, c3, info3.Workspace, "cat", "secret.txt"); got != "first owner" {
			t.Fatalf("%s: the claimed workspace reads %q", name, got)
		}
		if got := execIn(t, c3, info3.Workspace, "printenv", "POOL_FOO"); got != "first owner" {
			t.Fatalf("%s: the claimed sandbox's POOL_FOO = %q; the env set at the claim must stay", name, got)
		}
		if _, err := m2.Lookup(poolCtx(t), other, "c-pool-2"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("%s: Lookup of a conversation without a sandbox = %v, want not_found", name, err)
		}
		m2.Close()
	}
	// A deleted claimed sandbox is gone, not returned to any pool.
	m3 := managerOf(t, s.b)
	if err := m3.Delete(poolCtx(t), s.tenant, first.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.b.Inspect(poolCtx(t), first.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Inspect of the deleted claimed sandbox = %v, want not_found", err)
	}
}

func (s *suite) poolMissingImage(t *testing.T) {
	missing := "sandboxd-missing-" + randHex(4) + ":none"
	m := s.poolManager(t, s.b, sandbox.PoolSpec{Image: missing, Size: 1})
	deadline := time.Now().Add(3 * time.Minute)
	for len(m.PoolProblems()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a pool of a missing image reports no problem: %+v", m.PoolStats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p := m.PoolProblems()[0]
	if !strings.Contains(p, "pool "+missing+" cannot refill") || !strings.Contains(p, missing) {
		t.Errorf("problem = %q; want the pool and its image named", p)
	}
	if st := poolStat(m, missing); st.RefillFailures == 0 || st.Ready != 0 {
		t.Errorf("stat = %+v; want refill failures and nothing ready", st)
	}
	// Other images are created cold meanwhile.
	info, err := m.Create(poolCtx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-pool-cold", Image: s.cfg.image})
	if err != nil || info.Labels[sandbox.LabelPool] != "" {
		t.Fatalf("cold Create of %s = %+v, %v; want a sandbox not from a pool", s.cfg.image, info, err)
	}
	if _, err := m.Create(poolCtx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-pool-missing", Image: missing}); err == nil {
		t.Fatalf("Create of the missing image succeeded")
	}
	if st := poolStat(m, missing); st.Claims[sandbox.PoolEmpty] != 1 {
		t.Errorf("stat = %+v; want the create counted as empty", st)
	}
}

func (s *suite) poolDeployments(t *testing.T) {
	img := s.cfg.image
	blue := s.backend(t, sandbox.Deployment{Name: s.dep.Name + "-blue"})
	green := s.backend(t, sandbox.Deployment{Name: s.dep.Name + "-green"})
	mb := s.poolManager(t, blue, sandbox.PoolSpec{Image: img, Size: 1})
	mg := s.poolManager(t, green, sandbox.PoolSpec{Image: img, Size: 1})
	waitReady(t, mb, img, 1)
	waitReady(t, mg, img, 1)
	greenWarm := unclaimedIDs(t, green)
	if len(greenWarm) != 1 {
		t.Fatalf("green's unclaimed pool sandboxes = %v, want 1", greenWarm)
	}
	greenInfo, err := green.Inspect(poolCtx(t), greenWarm[0])
	if err != nil {
		t.Fatal(err)
	}
	if ids := unclaimedIDs(t, blue); len(ids) != 1 || ids[0] == greenWarm[0] {
		t.Fatalf("blue's unclaimed pool sandboxes = %v; want one of its own, not green's %s", ids, greenWarm[0])
	}
	got, err := mb.Create(poolCtx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-pool-dep", Image: img})
	if err != nil {
		t.Fatal(err)
	}
	if got.Deployment != blue.Deployment().Name || got.ID == greenWarm[0] {
		t.Fatalf("blue's claim = %+v; want one of blue's", got)
	}
	if _, err := blue.(sandbox.Claimer).Claim(poolCtx(t), greenInfo, sandbox.Owner{Tenant: s.tenant, Conversation: "c-steal"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("blue claiming green's pool sandbox = %v, want not_found", err)
	}
	if ids := unclaimedIDs(t, green); len(ids) != 1 || ids[0] != greenWarm[0] {
		t.Fatalf("green's pool after blue's claim = %v, want %s untouched", ids, greenWarm[0])
	}
}

func unclaimedIDs(t *testing.T, b sandbox.Backend) []string {
	t.Helper()
	infos, err := b.List(poolCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		if i.Labels[sandbox.LabelPool] != "" && i.Conversation == "" {
			out = append(out, i.ID)
		}
	}
	return out
}

// execIn runs argv in dir and returns its trimmed stdout.
func execIn(t *testing.T, c interface {
	Exec(context.Context, *proto.ExecRequest) (*proto.ExecResponse, error)
}, dir string, argv ...string) string {
	t.Helper()
	res, err := c.Exec(poolCtx(t), &proto.ExecRequest{Argv: argv, Dir: dir, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec %q = %+v, %v", argv, res, err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func removeTenant(t *testing.T, b sandbox.Backend, tenant string) {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	infos, err := b.List(c)
	if err != nil {
		return
	}
	for _, i := range infos {
		if i.Tenant == tenant {
			if err := b.Remove(c, i.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("cleanup of %s: %v", i.ID, err)
			}
		}
	}
}
