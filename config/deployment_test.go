package config

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox"
)

// The config refuses exactly the deployment names the backends refuse, so a
// config that loads never fails later at start-up.
func TestDeploymentRuleMatchesTheBackends(t *testing.T) {
	for _, name := range []string{"a", "z9", "prod-eu", "-a", "a-", "A", "a_b", "a.b", "a--b", "ä",
		strings.Repeat("a", 40), strings.Repeat("a", 41), "dir-0123456789ab"} {
		_, err := Parse([]byte("deployment: \"" + name + "\"\n"))
		configOK, backendOK := err == nil, sandbox.ValidateDeployment(name) == nil
		if configOK != backendOK {
			t.Errorf("deployment %q: config accepts %v, backends accept %v", name, configOK, backendOK)
		}
	}
}
