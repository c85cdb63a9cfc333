package runrecords

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/google/uuid"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/runstore"
	"github.com/sandboxd/sandboxd/tools"
)

var _ runstore.Records = (*Store)(nil)

const testNS = "sandboxd"

// started returns a started Store of deployment "prod" on cs; it stops
// with the test.
func started(t *testing.T, cs kubernetes.Interface, opts ...Option) *Store {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := New(cs, testNS, "prod", append([]Option{WithSyncTimeout(10 * time.Second)}, opts...)...)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// eventually polls cond for up to 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newRun(tenant, conversation string) tools.Run {
	return tools.Run{ID: "run_" + uuid.NewString(), Tenant: tenant, Conversation: conversation, Surface: "code", Approval: "ask", Workdir: "src"}
}

// The record is one ConfigMap named, labelled and filled as DESIGN.md §9 says.
func TestRecordShape(t *testing.T) {
	cs := fake.NewClientset()
	s := started(t, cs)
	run := tools.Run{ID: "run_3f2a9c1e-0b7d-4c55-9e21-7a8b6c5d4e3f", Tenant: "acme", Conversation: "c1", Surface: "code", Space: "sp", Approval: "auto", Vibe: true}
	if err := s.Put(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(testNS).Get(context.Background(), "sandboxd-prod-run-3f2a9c1e-0b7d-4c55-9e21-7a8b6c5d4e3f", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the record is not where DESIGN.md §9 names it: %v", err)
	}
	want := map[string]string{LabelDeployment: "prod", LabelKind: "run", LabelTenantHash: TenantHash("acme")}
	if len(cm.Labels) != len(want) {
		t.Errorf("labels = %v, want %v", cm.Labels, want)
	}
	for k, v := range want {
		if cm.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cm.Labels[k], v)
		}
	}
	if h := TenantHash("acme"); h != "822b33ad87c148a0a20a" { // printf acme | sha256sum | cut -c1-20
		t.Errorf("tenant hash = %q, want the first 20 hex of sha256(tenant)", h)
	}
	var got tools.Run
	if err := json.Unmarshal([]byte(cm.Data["run.json"]), &got); err != nil || got != run {
		t.Errorf("run.json = %s (%v), want %+v", cm.Data["run.json"], err, run)
	}
	if len(cm.Data) != 1 {
		t.Errorf("data keys = %v, want only run.json", cm.Data)
	}
}

// Two replicas on one cluster: what one puts the other lists, counts and
// gets from its cache; what one removes goes from both.
func TestTwoReplicas(t *testing.T) {
	cs := fake.NewClientset()
	var gets atomic.Int64
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})
	a, b := started(t, cs), started(t, cs)
	ctx := context.Background()
	r1, r2, other := newRun("t", "c1"), newRun("t", "c2"), newRun("u", "c1")
	for _, r := range []tools.Run{r1, r2, other} {
		if err := a.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// a reads its own writes at once.
	if n := a.Count("t"); n != 2 {
		t.Errorf("a.Count right after its puts = %d, want 2", n)
	}
	eventually(t, "b's cache holds a's three runs", func() bool { return b.Count("t") == 2 && b.Count("u") == 1 })
	if got := ids(b.List("t")); len(got) != 2 || !has(got, r1.ID) || !has(got, r2.ID) {
		t.Errorf("b.List(t) = %v", got)
	}
	if n := b.Count("nobody"); n != 0 || len(b.List("nobody")) != 0 {
		t.Errorf("a tenant without runs has %d", n)
	}
	before := gets.Load()
	got, ok, err := b.Get(ctx, r1.ID)
	if err != nil || !ok || got != r1 {
		t.Fatalf("b.Get = %+v, %v, %v; want %+v", got, ok, err, r1)
	}
	if gets.Load() != before {
		t.Errorf("a cached run cost %d GETs", gets.Load()-before)
	}

	if err := b.Remove(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.Get(ctx, r1.ID); ok {
		t.Errorf("b still gets the run it removed")
	}
	eventually(t, "a's cache drops the removed run", func() bool { return a.Count("t") == 1 })
	if _, ok, err := a.Get(ctx, r1.ID); ok || err != nil {
		t.Errorf("a.Get of a removed run = %v, %v", ok, err)
	}
	if err := a.Remove(ctx, r1.ID); err != nil {
		t.Errorf("removing a record that is gone: %v", err)
	}
}

// A Store whose cache has not seen a run asks the API server.
func TestGetMissAsksTheServer(t *testing.T) {
	cs := fake.NewClientset()
	writer := New(cs, testNS, "prod")
	reader := New(cs, testNS, "prod") // never started: an empty cache
	run := newRun("t", "c")
	if err := writer.Put(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	got, ok, err := reader.Get(context.Background(), run.ID)
	if err != nil || !ok || got != run {
		t.Errorf("Get past the cache = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := reader.Get(context.Background(), "run_00000000-0000-4000-8000-000000000000"); ok || err != nil {
		t.Errorf("Get of a run nobody made = %v, %v; want not found, no error", ok, err)
	}
	for _, id := range []string{"", "run_", "nope", "run_UPPER", "run_a_b"} {
		if _, ok, err := reader.Get(context.Background(), id); ok || err != nil {
			t.Errorf("Get(%q) = %v, %v; want not found, no error", id, ok, err)
		}
	}
	// A server that does not respond is an error, not a missing run.
	cs.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, _, err := reader.Get(context.Background(), "run_00000000-0000-4000-8000-000000000001"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Get with the server down: %v, want unavailable", err)
	}
}

// Put of an existing record replaces it; bad runs are refused.
func TestPut(t *testing.T) {
	cs := fake.NewClientset()
	s := started(t, cs)
	ctx := context.Background()
	run := newRun("t", "c")
	if err := s.Put(ctx, run); err != nil {
		t.Fatal(err)
	}
	run.Surface = "plan"
	if err := s.Put(ctx, run); err != nil {
		t.Fatalf("Put over an existing record: %v", err)
	}
	fresh := New(cs, testNS, "prod")
	if got, _, _ := fresh.Get(ctx, run.ID); got.Surface != "plan" {
		t.Errorf("the record was not replaced: %+v", got)
	}
	if n := s.Count("t"); n != 1 {
		t.Errorf("Count after two puts of one run = %d", n)
	}
	for name, bad := range map[string]tools.Run{
		"no id":     {Tenant: "t"},
		"foreign":   {ID: "job_1", Tenant: "t"},
		"no tenant": {ID: "run_00000000-0000-4000-8000-00000000000a"},
		"child":     {ID: "run_00000000-0000-4000-8000-00000000000b", Tenant: "t", Parent: run.ID},
	} {
		if err := s.Put(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: Put = %v, want invalid argument", name, err)
		}
	}
	cs.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("RBAC"))
	})
	err := s.Put(ctx, newRun("t", "c"))
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "Role") {
		t.Errorf("Put when forbidden: %v; want failed precondition naming the Role", err)
	}
}

// A record that is not a run this deployment wrote is skipped, logged
// once, and never served.
func TestBadRecordsAreSkipped(t *testing.T) {
	good := newRun("t", "c")
	labels := map[string]string{LabelDeployment: "prod", LabelKind: KindRun, LabelTenantHash: TenantHash("t")}
	cm := func(name string, labels map[string]string, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: labels}, Data: map[string]string{DataKey: data}}
	}
	goodJSON, _ := json.Marshal(good)
	child := newRun("t", "c")
	child.Parent = good.ID
	childJSON, _ := json.Marshal(child)
	otherDep := map[string]string{LabelDeployment: "staging", LabelKind: KindRun, LabelTenantHash: TenantHash("t")}
	wrongHash := map[string]string{LabelDeployment: "prod", LabelKind: KindRun, LabelTenantHash: TenantHash("u")}
	cs := fake.NewClientset(
		cm(recordName("prod", good.ID), labels, string(goodJSON)),
		cm("sandboxd-prod-run-00000000-0000-4000-8000-0000000000b1", labels, "{not json"),
		cm(recordName("prod", child.ID), labels, string(childJSON)),
		cm("sandboxd-prod-run-00000000-0000-4000-8000-0000000000b3", labels, string(goodJSON)), // name and id differ
		cm(recordName("staging", good.ID), otherDep, string(goodJSON)),
		cm("sandboxd-prod-run-00000000-0000-4000-8000-0000000000b5", wrongHash, strings.Replace(string(goodJSON), good.ID[4:], "00000000-0000-4000-8000-0000000000b5", 1)),
	)
	var buf syncBuffer
	s := started(t, cs, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if got := ids(s.List("t")); len(got) != 1 || got[0] != good.ID {
		t.Errorf("List = %v, want only the good run", got)
	}
	if n := s.Count("t"); n != 1 {
		t.Errorf("Count = %d, want 1", n)
	}
	if _, ok, err := s.Get(context.Background(), "run_00000000-0000-4000-8000-0000000000b1"); ok || err != nil {
		t.Errorf("Get of an undecodable record = %v, %v; want not found", ok, err)
	}
	logs := buf.String()
	for _, name := range []string{"0000000000b1", "0000000000b3", "0000000000b5", recordName("prod", child.ID)} {
		if !strings.Contains(logs, name) {
			t.Errorf("the skipped record %s was not logged:\n%s", name, logs)
		}
	}
	if n := strings.Count(logs, "0000000000b1"); n != 1 {
		t.Errorf("the undecodable record was logged %d times, want once:\n%s", n, logs)
	}
	if strings.Contains(logs, "staging") {
		t.Errorf("another deployment's record was looked at:\n%s", logs)
	}
}

// An informer event older than a delete made here does not bring the
// record back.
func TestRemoveIsNotUndoneByAnOldEvent(t *testing.T) {
	cs := fake.NewClientset()
	s := New(cs, testNS, "prod") // not started: the test plays the informer
	ctx := context.Background()
	run := newRun("t", "c")
	if err := s.Put(ctx, run); err != nil {
		t.Fatal(err)
	}
	old, err := cs.CoreV1().ConfigMaps(testNS).Get(ctx, recordName("prod", run.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	handler{s}.OnUpdate(old, old) // the informer is behind: it has not seen the delete yet
	if _, ok, _ := s.Get(ctx, run.ID); ok || s.Count("t") != 0 {
		t.Errorf("a stale event brought a removed record back")
	}
	handler{s}.OnDelete(cache.DeletedFinalStateUnknown{Key: testNS + "/" + old.Name, Obj: old})
	if _, ok, _ := s.Get(ctx, run.ID); ok {
		t.Errorf("served after its delete event")
	}
	// Putting it again (the same id) is honoured.
	if err := s.Put(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, run.ID); !ok {
		t.Errorf("a record put after its removal is not served")
	}
}

// Start gives up at its deadline when the records cannot be listed, and
// a Store starts once.
func TestStart(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	s := New(cs, testNS, "prod", WithSyncTimeout(300*time.Millisecond))
	t0 := time.Now()
	err := s.Start(context.Background())
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Start with the server down: %v, want unavailable", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Start waited %s past its 300ms deadline", d)
	}
	ok := started(t, fake.NewClientset())
	if err := ok.Start(context.Background()); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("second Start: %v, want failed precondition", err)
	}
}

// Two run stores, one per replica, each on its own Store over one cluster.
func TestRunStoresOverRecords(t *testing.T) {
	cs := fake.NewClientset()
	a := runstore.New(runstore.WithRecords(started(t, cs), nil))
	b := runstore.New(runstore.WithRecords(started(t, cs), nil))
	run, err := a.Create(t.Context(), tools.Run{Tenant: "t", Conversation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	// b has not seen it in its cache yet, or has: either way it is served.
	if got, err := b.Get(t.Context(), "t", run.ID); err != nil || got != run {
		t.Fatalf("b.Get = %+v, %v", got, err)
	}
	if err := b.Delete(t.Context(), "t", run.ID); err != nil {
		t.Fatal(err)
	}
	// a learns of the delete through its informer: it stops serving the
	// run once its cache has dropped the record.
	eventually(t, "a stops serving the run b deleted", func() bool {
		_, err := a.Get(t.Context(), "t", run.ID)
		return errors.Is(err, errdefs.ErrNotFound)
	})
}

func ids(runs []tools.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func has(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for the informer's goroutine and the
// test's.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
