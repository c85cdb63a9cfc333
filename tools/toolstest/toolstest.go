// Package toolstest holds what the tool families' test harnesses share:
// calling tools through a real registry as the API does (Call, OK, Bad),
// the sandbox accessor serve wires for a managed sandbox, and the check
// that a vanished sandbox is reported as such.
package toolstest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/tools"
)

// Caller runs tools through a registry for one test, as the API's
// POST /v1/runs/{id}/tools/{name} does.
type Caller struct {
	T   testing.TB
	Reg *tools.Registry
	Env *tools.Env
	// Timeout bounds one call (a minute when zero).
	Timeout time.Duration
	// LogTimes logs each call's arguments and duration.
	LogTimes bool
}

// Result runs the named tool with args (marshalled to JSON) and returns its
// result. A Go error from the registry (a tool the run cannot see, a call
// that gave up waiting for its turn) ends the test.
func (c *Caller) Result(name string, args any) tools.Result {
	c.T.Helper()
	return c.ResultIn(c.Env, name, args)
}

// ResultIn is Result for another run's env.
func (c *Caller) ResultIn(env *tools.Env, name string, args any) tools.Result {
	c.T.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		c.T.Fatal(err)
	}
	d := c.Timeout
	if d == 0 {
		d = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	res, err := c.Reg.Call(ctx, env, name, raw)
	if c.LogTimes {
		c.T.Logf("%s %s: %s", name, raw, time.Since(start).Round(time.Millisecond))
	}
	if err != nil {
		c.T.Fatalf("%s %v: Go error %v", name, args, err)
	}
	return res
}

// Call runs a tool and returns its text and is_error.
func (c *Caller) Call(name string, args any) (string, bool) {
	c.T.Helper()
	res := c.Result(name, args)
	return res.Text(), res.IsError
}

// OK runs a call that must succeed and whose text must contain every want.
func (c *Caller) OK(name string, args any, wants ...string) string {
	c.T.Helper()
	text, isErr := c.Call(name, args)
	if isErr {
		c.T.Fatalf("%s %v failed:\n%s", name, args, text)
	}
	for _, w := range wants {
		if !strings.Contains(text, w) {
			c.T.Fatalf("%s %v: answer lacks %q:\n%s", name, args, w, text)
		}
	}
	return text
}

// Bad runs a call that must fail (is_error) with a text containing every
// want.
func (c *Caller) Bad(name string, args any, wants ...string) string {
	c.T.Helper()
	text, isErr := c.Call(name, args)
	if !isErr {
		c.T.Fatalf("%s %v: want an error, got:\n%s", name, args, text)
	}
	for _, w := range wants {
		if !strings.Contains(text, w) {
			c.T.Fatalf("%s %v: error lacks %q:\n%s", name, args, w, text)
		}
	}
	return text
}
