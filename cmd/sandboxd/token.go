package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/config"
)

var tokenGroup = group{name: "token", usage: `usage:
  sandboxd token new --tenant NAME [--json]

Prints a fresh random token and its SHA-256, and the tenants entry to put in
the config file or the Helm chart's values. Takes --help for its flags.
`}

// tokenRandomBytes is the entropy of a token, as of the admin token.
const tokenRandomBytes = 32

// newToken is a random bearer token in the admin token's form.
func newToken() (string, error) {
	var b [tokenRandomBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("no random bytes for a token: %w", err)
	}
	return "sbx_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewToken is what `token new --json` prints.
type NewToken struct {
	Tenant      string `json:"tenant"`
	Token       string `json:"token"`
	TokenSHA256 string `json:"token_sha256"`
}

// tenantSnippet is the tenants entry of one tenant; the config file and
// the chart's values take it as it is.
func tenantSnippet(name, hash string) string {
	return fmt.Sprintf("tenants:\n  - name: %s\n    token_sha256: %s\n", name, hash)
}

// runToken makes tokens locally; it talks to no daemon.
func runToken(args []string, stdout io.Writer) error {
	if ok, err := tokenGroup.check(args); !ok {
		return err
	}
	if args[0] != "new" {
		return tokenGroup.unknown(args[0])
	}
	cmd := newCommand("token new", "sandboxd token new --tenant NAME [--json]")
	var tenant string
	var asJSON bool
	cmd.fs.StringVar(&tenant, "tenant", "", "the tenant the token is for (required; 1 to 63 of a-z, 0-9, '-', '_')")
	cmd.fs.BoolVar(&asJSON, "json", false, "print tenant, token and token_sha256 as JSON")
	pos, err := cmd.parse(args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 || tenant == "" {
		return cmd.bad()
	}
	tok, err := newToken()
	if err != nil {
		return err
	}
	hash := api.HashToken(tok)
	snippet := tenantSnippet(tenant, hash)
	// The snippet is checked by sandboxd's own config parser, so a name the
	// daemon would refuse is refused here, with the daemon's error message.
	if _, err := config.Parse([]byte(snippet)); err != nil {
		return usagef("--tenant %q: %v", tenant, err)
	}
	if asJSON {
		return printJSON(stdout, NewToken{Tenant: tenant, Token: tok, TokenSHA256: hash})
	}
	fmt.Fprintf(stdout, `token: %s
token_sha256: %s

Give the token to tenant %s (it is shown once; sandboxd keeps only the SHA-256).
Add this entry to the config file (sandboxd serve --config FILE) or to the
Helm chart's values, beside any tenants already there:

%s`, tok, hash, tenant, snippet)
	return nil
}
