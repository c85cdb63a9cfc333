package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
)

// TestTokenNew: the printed token authenticates as the tenant once the
// printed snippet is the config, in the text and the --json form, and two
// calls never print the same token.
func TestTokenNew(t *testing.T) {
	code, out, errs := runCLI(t, "", "token", "new", "--tenant", "team-a")
	if code != 0 || errs != "" {
		t.Fatalf("token new: %d %q", code, errs)
	}
	var tok, hash string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "token: "); ok {
			tok = v
		}
		if v, ok := strings.CutPrefix(l, "token_sha256: "); ok {
			hash = v
		}
	}
	if tok == "" || hash != api.HashToken(tok) {
		t.Fatalf("token new printed token %q and token_sha256 %q, want the SHA-256 of the token:\n%s", tok, hash, out)
	}
	snippet := out[strings.Index(out, "tenants:"):]
	cfg, err := config.Parse([]byte(snippet))
	if err != nil {
		t.Fatalf("the printed snippet is not a config sandboxd takes: %v\n%s", err, snippet)
	}
	if len(cfg.Tenants) != 1 {
		t.Fatalf("snippet tenants = %v", cfg.Tenants)
	}
	tt, err := api.ParseTenantToken(cfg.Tenants[0].Name, cfg.Tenants[0].TokenSHA256)
	if err != nil {
		t.Fatal(err)
	}
	if tenant, ok := api.NewTokenAuth(tt).Authenticate(tok); !ok || tenant != "team-a" {
		t.Errorf("the token authenticates as %q (%v), want team-a", tenant, ok)
	}

	code, out, _ = runCLI(t, "", "token", "new", "--tenant", "team-a", "--json")
	var nt NewToken
	if code != 0 || json.Unmarshal([]byte(out), &nt) != nil || nt.Tenant != "team-a" || nt.TokenSHA256 != api.HashToken(nt.Token) {
		t.Fatalf("token new --json: %d %s", code, out)
	}
	if nt.Token == tok {
		t.Error("two token new calls printed the same token")
	}
}
