package sandboxtest

import (
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// expiryAndLabels: a front end's labels and an expiry set at creation,
// and an expiry changed after it, are what a new Manager (a restarted
// sandboxd, another replica) reads in List and Get; the newest change
// wins, and a cleared expiry reads as cleared, not as the one at creation.
func (s *suite) expiryAndLabels(t *testing.T) {
	m := s.manager(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	ext := map[string]string{sandbox.LabelExtPrefix + "suite": `{"template":"base","metadata":{"k":"v w"}}`}
	info, err := m.Create(ctx(t), sandbox.Spec{Tenant: s.tenant, Conversation: "c-expiry", Image: s.cfg.image, Runtime: s.cfg.runtime,
		Expiry: sandbox.Expiry{At: at, Then: sandbox.ExpireDelete}, Labels: ext})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	check := func(when string, want sandbox.Expiry) {
		t.Helper()
		fresh := managerOf(t, s.b)
		got, err := fresh.Get(ctx(t), s.tenant, info.ID)
		if err != nil {
			t.Fatalf("%s: a new Manager's Get: %v", when, err)
		}
		list, err := fresh.List(ctx(t), s.tenant, "c-expiry")
		if err != nil || len(list) != 1 {
			t.Fatalf("%s: a new Manager's List: %+v %v", when, list, err)
		}
		for how, i := range map[string]sandbox.Info{"Get": got, "List": list[0]} {
			e, set, err := sandbox.ExpiryOf(i)
			if err != nil || !set || !e.At.Equal(want.At) || e.Then != want.Then {
				t.Errorf("%s: %s reads the expiry %+v (set %v, %v); want %+v", when, how, e, set, err, want)
			}
			if v := sandbox.ExtLabels(i)[sandbox.LabelExtPrefix+"suite"]; v != ext[sandbox.LabelExtPrefix+"suite"] {
				t.Errorf("%s: %s reads the front end's label %q", when, how, v)
			}
		}
		fresh.Close()
	}
	check("at creation", sandbox.Expiry{At: at, Then: sandbox.ExpireDelete})
	for i, e := range []sandbox.Expiry{
		{At: at.Add(time.Hour), Then: sandbox.ExpirePause},
		{At: at.Add(2 * time.Hour), Then: sandbox.ExpireHibernate},
		{},
	} {
		if err := m.SetExpiry(ctx(t), s.tenant, info.ID, e); err != nil {
			t.Fatalf("SetExpiry #%d: %v", i+1, err)
		}
		check("after SetExpiry", e)
	}
}
