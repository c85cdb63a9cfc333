package lsp

import (
	"encoding/json"
	"github.com/sandboxd/sandboxd/agent/proto"
	"testing"
)

func TestWatcherRegistrationsMatch(t *testing.T) {
	srv := newServer(&Language{Name: "go"}, "/ws/proj")
	srv.register(json.RawMessage(`{"registrations": [
		{"id": "a", "method": "workspace/didChangeWatchedFiles", "registerOptions": {"watchers": [
			{"globPattern": "**/*.{go,mod,sum}"},
			{"globPattern": {"baseUri": "file:///ws/proj/sub", "pattern": "**/*.py"}, "kind": 4},
			{"globPattern": {"baseUri": {"uri": "file:///ws/proj", "name": "proj"}, "pattern": "conf/[!x]?.toml"}},
			{"globPattern": "/ws/abs/*.ts"}
		]}},
		{"id": "b", "method": "textDocument/formatting", "registerOptions": {}}
	]}`))
	cases := []struct {
		file string
		kind int
		want bool
	}{
		{"/ws/proj/main.go", 2, true},
		{"/ws/proj/deep/er/go.mod", 1, true},
		{"/ws/proj/main.gox", 2, false},
		{"/ws/proj/sub/a/b.py", 3, true},  // deletions only
		{"/ws/proj/sub/a/b.py", 2, false}, // a change is not asked for
		{"/ws/proj/other/b.py", 3, false}, // outside the base
		{"/ws/proj/conf/ab.toml", 2, true},
		{"/ws/proj/conf/xb.toml", 2, false},
		{"/ws/proj/conf/abc.toml", 2, false},
		{"/ws/abs/x.ts", 1, true},
		{"/ws/abs/deeper/x.ts", 1, false},
	}
	for _, c := range cases {
		if got := srv.wantsChange(c.file, proto.ChangeKind(c.kind)); got != c.want {
			t.Errorf("change %d of %s: wanted %v, got %v", c.kind, c.file, c.want, got)
		}
	}
	if n := srv.watcherCount(); n != 4 {
		t.Errorf("%d watchers registered, want 4 (the formatting registration is not one)", n)
	}
	srv.unregister(json.RawMessage(`{"unregisterations": [{"id": "a", "method": "workspace/didChangeWatchedFiles"}]}`))
	if srv.wantsChange("/ws/proj/main.go", 2) {
		t.Error("an unregistered watcher still matches")
	}
}
