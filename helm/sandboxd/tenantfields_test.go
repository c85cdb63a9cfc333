package chart

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/sandboxd/sandboxd/config"
)

// tenantSchema is the schema of one entry of the chart's tenants value.
func tenantSchema(t *testing.T) (props map[string]struct{ Pattern string }, oneOf []map[string][]string) {
	t.Helper()
	b, err := os.ReadFile("values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Tenants struct {
				Items struct {
					Properties map[string]struct{ Pattern string } `json:"properties"`
					OneOf      []map[string][]string               `json:"oneOf"`
				} `json:"items"`
			} `json:"tenants"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s.Properties.Tenants.Items.Properties, s.Properties.Tenants.Items.OneOf
}

// TestTenantFieldsMatchConfig: every key of a tenant in sandboxd's config
// file is a key of a tenant in the chart's values, meaning the same there
// (rendered into the config unchanged), and a name the one refuses the
// other refuses too; so the entry `sandboxd token new` prints pastes into
// either.
func TestTenantFieldsMatchConfig(t *testing.T) {
	props, oneOf := tenantSchema(t)
	typ := reflect.TypeOf(config.Tenant{})
	for i := 0; i < typ.NumField(); i++ {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if _, ok := props[key]; !ok {
			t.Errorf("config tenants take %q, the chart's values.schema.json tenants do not (it has %v)", key, reflect.ValueOf(props).MapKeys())
		}
	}

	const hash = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"
	// The entry as the config file (and `sandboxd token new`) writes it.
	snippet := "tenants:\n  - name: team-b\n    token_sha256: " + hash + "\n"
	fromConfig, err := config.Parse([]byte(snippet))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ReadValues([]byte(snippet))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"token_sha256", "tokenSHA256"} {
		entry := map[string]any{"name": "team-b", key: hash}
		if key == "token_sha256" {
			entry = vals.AsMap()["tenants"].([]any)[0].(map[string]any)
		}
		cfg := parseConfig(t, render(t, map[string]any{"tenants": []any{entry}}))
		if !reflect.DeepEqual(cfg.Tenants, fromConfig.Tenants) {
			t.Errorf("values tenant with %s renders tenants %+v, the config file reads %+v", key, cfg.Tenants, fromConfig.Tenants)
		}
	}

	// One token form per tenant: the schema takes exactly one of them.
	c := load(t)
	for _, tc := range []struct {
		vals string
		ok   bool
	}{
		{"tenants: [{name: a, token_sha256: " + hash + "}]", true},
		{"tenants: [{name: a, token: a-long-random-token-0123}]", true},
		{"tenants: [{name: a, token_sha256: " + hash + ", tokenSHA256: " + hash + "}]", false},
		{"tenants: [{name: a, token: a-long-random-token-0123, token_sha256: " + hash + "}]", false},
		{"tenants: [{name: a, token_sha256: not-hex}]", false},
		{"tenants: [{name: a, token_sha: " + hash + "}]", false},
	} {
		v, err := chartutil.ReadValues([]byte(tc.vals))
		if err != nil {
			t.Fatal(err)
		}
		_, err = chartutil.ToRenderValues(c, v, chartutil.ReleaseOptions{Name: "sd", Namespace: releaseNS}, chartutil.DefaultCapabilities)
		if (err == nil) != tc.ok {
			t.Errorf("values %q: schema error %v, want accepted=%v", tc.vals, err, tc.ok)
		}
	}
	if len(oneOf) != 3 {
		t.Errorf("tenants oneOf = %v, want token, token_sha256 or tokenSHA256", oneOf)
	}

	// Tenant names: the chart's pattern and sandboxd's config agree.
	name := regexp.MustCompile(props["name"].Pattern)
	for _, n := range []string{"a", "team-a", "team_a", "0day", "Team", "-a", "_a", "a.b", "", strings.Repeat("a", 63), strings.Repeat("a", 64)} {
		_, err := config.Parse([]byte("tenants:\n  - name: \"" + n + "\"\n    token_sha256: " + hash + "\n"))
		if name.MatchString(n) != (err == nil) {
			t.Errorf("tenant name %q: chart pattern accepts=%v, config accepts=%v (%v)", n, name.MatchString(n), err == nil, err)
		}
	}
}

// A tenant's network keys reach sandboxd's config as the config file
// spells them.
func TestTenantNetworkKeysRender(t *testing.T) {
	const hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	entry := map[string]any{
		"name": "team-a", "token_sha256": hash, "default_network": "proxy",
		"egress":  map[string]any{"allow": []any{"pypi.org", "*.npmjs.org"}, "deny": []any{"evil.npmjs.org"}},
		"secrets": []any{map[string]any{"name": "gh", "hosts": []any{"api.github.com"}, "value_env": "GH_TOKEN"}},
	}
	cfg := parseConfig(t, render(t, map[string]any{"tenants": []any{entry}}))
	if len(cfg.Tenants) != 1 {
		t.Fatalf("tenants = %+v", cfg.Tenants)
	}
	got := cfg.Tenants[0]
	if got.DefaultNetwork != "proxy" || got.Egress == nil || !reflect.DeepEqual(got.Egress.Allow, []string{"pypi.org", "*.npmjs.org"}) ||
		!reflect.DeepEqual(got.Egress.Deny, []string{"evil.npmjs.org"}) || len(got.Secrets) != 1 || got.Secrets[0].Name != "gh" || got.Secrets[0].ValueEnv != "GH_TOKEN" {
		t.Fatalf("the rendered tenant = %+v", got)
	}
}

// A tenant's lifecycle reaches sandboxd's config as the config file
// spells it, and a duration it cannot read is refused by the schema.
func TestTenantLifecycleRenders(t *testing.T) {
	const hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	entry := map[string]any{"name": "team-a", "token_sha256": hash, "lifecycle": map[string]any{"hibernate_after": "30m", "delete_after": "24h"}}
	cfg := parseConfig(t, render(t, map[string]any{"tenants": []any{entry}}))
	if len(cfg.Tenants) != 1 || cfg.Tenants[0].Lifecycle == nil {
		t.Fatalf("tenants = %+v, want team-a with its lifecycle", cfg.Tenants)
	}
	if l := cfg.LifecycleFor("team-a"); l.HibernateAfter.D() != 30*time.Minute || l.DeleteAfter.D() != 24*time.Hour || l.PauseAfter != 0 {
		t.Fatalf("team-a's lifecycle = %+v, want hibernate after 30m and delete after 24h", l)
	}
	vals, err := chartutil.ReadValues([]byte("tenants: [{name: a, token_sha256: " + hash + ", lifecycle: {pause_after: soon}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.ToRenderValues(load(t), vals, chartutil.ReleaseOptions{Name: "sd", Namespace: releaseNS}, chartutil.DefaultCapabilities); err == nil || !strings.Contains(err.Error(), "pause_after") {
		t.Errorf("a lifecycle of %q gave %v, want a schema error naming pause_after", "soon", err)
	}
}
