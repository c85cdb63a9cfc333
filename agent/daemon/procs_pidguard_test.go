package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPidsCgroupRead(t *testing.T) {
	dir := t.TempDir()
	put := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &pidsCgroup{dir: dir}
	if _, _, err := c.read(); err == nil {
		t.Fatal("read of a directory without pids files succeeded")
	}
	if n := c.refusedCount(); n != -1 {
		t.Fatalf("refused without pids.events = %d, want -1", n)
	}
	put("pids.current", "61\n")
	put("pids.max", "64\n")
	put("pids.events", "max 7\n")
	cur, lim, err := c.read()
	if err != nil || cur != 61 || lim != 64 {
		t.Fatalf("read = %d, %d, %v", cur, lim, err)
	}
	if n := c.refusedCount(); n != 7 {
		t.Fatalf("refused = %d, want 7", n)
	}
	g := &pidGuard{cg: c}
	u, err := g.usage()
	if err != nil || !u.low() || u.reserve != 4 || u.refused != 7 {
		t.Fatalf("usage = %+v, %v; want 61 of 64 with a reserve of 4 to be low", u, err)
	}
	put("pids.current", "60\n")
	if u, _ := g.usage(); u.low() {
		t.Fatalf("usage = %+v: 4 free is not low", u)
	}
	put("pids.max", "max\n")
	if _, lim, err := c.read(); err != nil || lim != 0 {
		t.Fatalf("an unlimited cgroup reads limit %d, %v; want 0", lim, err)
	}
	if u, _ := g.usage(); u.low() {
		t.Fatalf("an unlimited cgroup is low: %+v", u)
	}
	for limit, want := range map[int64]int64{16: 4, 64: 4, 1024: 64, 1 << 20: 64} {
		if got := pidReserve(limit); got != want {
			t.Errorf("pidReserve(%d) = %d, want %d", limit, got, want)
		}
	}
}
