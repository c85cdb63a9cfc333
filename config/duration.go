package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML as "90s", "5m" or "2h".
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML accepts only Go duration strings: a bare number would be
// ambiguous (seconds? nanoseconds?).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return valueError{fmt.Sprintf("line %d: a duration must be a string such as \"90s\", \"5m\" or \"2h\"", n.Line)}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return valueError{fmt.Sprintf("line %d: %q is not a duration; write it with a unit, such as \"90s\", \"5m\" or \"2h\"", n.Line, n.Value)}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration in Go notation.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// valueError is a value problem already phrased for a person; it passes
// through describeYAMLError unchanged.
type valueError struct{ msg string }

func (e valueError) Error() string { return e.msg }
