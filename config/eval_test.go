package config

import (
	"strings"
	"testing"
	"time"
)

func TestEvalKeys(t *testing.T) {
	c, err := Parse([]byte("eval:\n  host: false\n  budget: 2m\n  python: /usr/bin/python3\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Eval.WithDefaults()
	if c.Eval.HostKernels(false) || e.Budget.D() != 2*time.Minute || e.MaxBudget.D() != time.Hour || e.Python != "/usr/bin/python3" || e.Node != "node" {
		t.Fatalf("eval = %+v", e)
	}
	if !Default().Eval.HostKernels(false) {
		t.Fatal("host kernels are on by default without tenants")
	}
	for yaml, want := range map[string]string{
		"eval:\n  budget: 2h\n  max_budget: 1h\n":                   "eval.budget: 2h0m0s is larger than eval.max_budget",
		"eval:\n  max_output_bytes: 10\n":                           "eval.max_output_bytes: is 10",
		"eval:\n  budgett: 1m\n":                                    "budgett",
		"eval:\n  jail: {uid_first: -1}\n":                          "eval.jail.uid_first: is -1",
		"eval:\n  jail: {uid_count: 5}\n":                           "eval.jail.uid_first: is 0",
		"eval:\n  jail: {uid_first: 2147483000, uid_count: 1000}\n": "runs past the largest uid",
		"eval:\n  jail: {memory_mb: 10}\n":                          "eval.jail.memory_mb: is 10",
		"eval:\n  jail: {pids: 3}\n":                                "eval.jail.pids: is 3",
		"eval:\n  jail: {read_only: [opt]}\n":                       "eval.jail.read_only: has \"opt\"",
		"eval:\n  jail: {memroy_mb: 10}\n":                          "memroy_mb",
	} {
		c, err := Parse([]byte(yaml))
		if err == nil {
			err = c.Eval.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, err, want)
		}
	}
}

// With tenants configured, host kernels are off unless the config turns
// them on by name; without tenants they are on unless turned off.
func TestHostKernelsWithTenants(t *testing.T) {
	for _, tc := range []struct {
		yaml    string
		tenants bool
		want    bool
	}{
		{"", false, true},
		{"", true, false},
		{"eval: {host: true}\n", true, true},
		{"eval: {host: false}\n", false, false},
		{"eval: {host: false}\n", true, false},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Eval.HostKernels(tc.tenants); got != tc.want {
			t.Errorf("%q with tenants=%v: host kernels %v, want %v", tc.yaml, tc.tenants, got, tc.want)
		}
	}
	c, err := Parse([]byte("eval:\n  jail: {uid_first: 500000, uid_count: 10, memory_mb: 256, pids: 64, cpus: 0.5, network: true, read_only: [/opt/py]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Eval.Validate(); err != nil {
		t.Fatal(err)
	}
	if j := c.Eval.Jail; j.UIDFirst != 500000 || j.UIDCount != 10 || j.MemoryMB != 256 || j.Pids != 64 || j.CPUs != 0.5 || !j.Network || len(j.ReadOnly) != 1 {
		t.Fatalf("jail = %+v", j)
	}
}
