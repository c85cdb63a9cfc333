package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/audit"
)

// TestAuditVerifyExitStatus: 0 and "whole" for an untouched chain, 1 and
// the record named for an edited one, 2 for a command line without DIR.
func TestAuditVerifyExitStatus(t *testing.T) {
	dir := t.TempDir()
	l, err := audit.Open(audit.Options{Dir: dir, Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.Append(audit.Record{Kind: audit.KindAPI, Tenant: "a", Action: "GET /v1/runs", Outcome: "ok"}, true)
	}
	l.Close()
	code, out, errs := runCLI(t, "", "audit", "verify", dir)
	if code != 0 || !strings.Contains(out, "chain of 5 records") || errs != "" {
		t.Fatalf("verify of a whole chain: exit %d, %q, %q", code, out, errs)
	}
	p := filepath.Join(dir, audit.FileName(1))
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), `"tenant":"a"`, `"tenant":"z"`, 1)), 0o600)
	code, out, _ = runCLI(t, "", "audit", "verify", dir)
	if code != 1 || !strings.Contains(out, "seq 1 at "+audit.FileName(1)+" line 1 was changed") {
		t.Fatalf("verify of an edited chain: exit %d, %q", code, out)
	}
	if code, _, _ := runCLI(t, "", "audit", "verify"); code != 2 {
		t.Fatalf("verify without DIR: exit %d, want 2", code)
	}
}
