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
	if c.Eval.HostKernels() || e.Budget.D() != 2*time.Minute || e.MaxBudget.D() != time.Hour || e.Python != "/usr/bin/python3" || e.Node != "node" {
		t.Fatalf("eval = %+v", e)
	}
	if !Default().Eval.HostKernels() {
		t.Fatal("host kernels are on by default")
	}
	for yaml, want := range map[string]string{
		"eval:\n  budget: 2h\n  max_budget: 1h\n": "eval.budget (2h0m0s) is larger than eval.max_budget",
		"eval:\n  max_output_bytes: 10\n":         "eval.max_output_bytes is 10",
		"eval:\n  budgett: 1m\n":                  "budgett",
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
