package api

import (
	"encoding/json"
	"testing"
)

func TestReadyzNamesAPoolThatCannotRefill(t *testing.T) {
	var problems []string
	h := newHarness(t, WithPinger(fakePinger{}), WithReadyNotes(func() []string { return problems }))
	var st ReadyStatus
	a := h.do("GET", "/readyz", "", "")
	if err := json.Unmarshal(a.body, &st); err != nil || a.status != 200 || st.Status != "ok" || len(st.Problems) != 0 {
		t.Fatalf("readyz with every pool healthy: %d %s", a.status, a.body)
	}
	problems = []string{"pool gone:1 cannot refill: image gone:1 is not on the Docker engine; build it"}
	a = h.do("GET", "/readyz", "", "")
	st = ReadyStatus{}
	if err := json.Unmarshal(a.body, &st); err != nil || a.status != 200 || st.Status != "degraded" ||
		len(st.Problems) != 1 || st.Problems[0] != problems[0] {
		t.Fatalf("readyz with a pool that cannot refill: %d %s; want 200, degraded, the pool's sentence", a.status, a.body)
	}
}
