package config

import (
	"strings"
	"testing"
)

func TestPoolsParse(t *testing.T) {
	c, err := Parse([]byte("pools:\n  - {image: sandboxd-sandbox:latest, size: 4}\n  - {image: py:3, size: 2, backend: kubernetes}\n  - {image: py:3, size: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pools) != 3 || c.Pools[0].Size != 4 || c.Pools[1].Backend != "kubernetes" {
		t.Fatalf("pools = %+v", c.Pools)
	}
	if got := c.PoolsFor("docker"); len(got) != 2 || got[1].Image != "py:3" || got[1].Size != 1 {
		t.Errorf("PoolsFor(docker) = %+v, want the two without a backend", got)
	}
	if got := c.PoolsFor("kubernetes"); len(got) != 2 || got[1].Size != 2 {
		t.Errorf("PoolsFor(kubernetes) = %+v, want the default image's and py:3 of size 2", got)
	}
}

func TestPoolsRejected(t *testing.T) {
	for yaml, want := range map[string]string{
		"pools: [{size: 2}]":                                                 "pools[0].image: is empty",
		"pools: [{image: a, size: 0}]":                                       "pools[0].size: 0 is out of range (image a); keep 1 to 64",
		"pools: [{image: a, size: 65}]":                                      "pools[0].size: 65 is out of range",
		"pools: [{image: a, size: 1, backend: host}]":                        `pools[0].backend: "host" has no warm pools (image a); use docker or kubernetes`,
		"pools: [{image: a, size: 1}, {image: a, size: 2}]":                  "pools[1].image: a is pooled twice (also pools[0])",
		"pools: [{image: a, size: 1, warm: true}]":                           `unknown key "warm"`,
		"pools: [{image: ' a', size: 1}]":                                    "surrounding spaces",
		"pools: {image: a, size: 1}":                                         "a list is expected",
		"pools: [{image: a, size: 1, backend: docker}, {image: a, size: 1}]": "",
	} {
		_, err := Parse([]byte(yaml))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", yaml, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want one containing %q", yaml, err, want)
		}
	}
}
