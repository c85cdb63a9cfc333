package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestNetworkLabelsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		mode string
		want EgressSpec
	}{
		{"default", Spec{}, "none", EgressSpec{Open: true}},
		{"bridge", Spec{Network: "bridge"}, "bridge", EgressSpec{Open: true}},
		{"proxy open", Spec{Network: NetworkProxy}, NetworkProxy, EgressSpec{Open: true}},
		{"proxy narrowed", Spec{Network: NetworkProxy, Egress: &EgressSpec{Allow: []string{"pypi.org"}, Deny: []string{"*.evil.test"}, Secrets: []string{"github"}}},
			NetworkProxy, EgressSpec{Allow: []string{"pypi.org"}, Deny: []string{"*.evil.test"}, Secrets: []string{"github"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := Info{ID: "x", Labels: NetworkLabels(tc.spec)}
			if got := NetworkOf(info); got != tc.mode {
				t.Errorf("mode %q, want %q", got, tc.mode)
			}
			got, err := EgressOf(info)
			if err != nil || got.Open != tc.want.Open || !slices.Equal(got.Allow, tc.want.Allow) ||
				!slices.Equal(got.Deny, tc.want.Deny) || !slices.Equal(got.Secrets, tc.want.Secrets) {
				t.Errorf("egress %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if NetworkOf(Info{}) != "none" {
		t.Error("a sandbox from before the label is not network none")
	}
	if _, err := EgressOf(Info{ID: "x", Labels: map[string]string{LabelEgress: "{"}}); err == nil {
		t.Error("a broken egress label parsed")
	}
}

func TestValidateSpecNetworks(t *testing.T) {
	base := Spec{Tenant: "t", Conversation: "c"}
	for _, tc := range []struct {
		net    string
		egress *EgressSpec
		bad    string
	}{
		{"", nil, ""}, {"none", nil, ""}, {"bridge", nil, ""}, {NetworkProxy, nil, ""},
		{NetworkProxy, &EgressSpec{Allow: []string{"a.test"}}, ""},
		{"host", nil, `use "none", "bridge" or "proxy"`},
		{"none", &EgressSpec{Allow: []string{"a.test"}}, `set "network": "proxy"`},
	} {
		s := base
		s.Network, s.Egress = tc.net, tc.egress
		err := validateSpec(s)
		if tc.bad == "" && err != nil || tc.bad != "" && (!errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("network %q egress %v: %v, want %q", tc.net, tc.egress, err, tc.bad)
		}
	}
}
