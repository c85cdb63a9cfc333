package family_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// clock is a tool that returns the time of day.
type clock struct{}

func (clock) Spec() tools.Spec {
	return tools.Spec{Name: "clock", Description: "Tells the time.", Level: tools.LevelRead, ParallelSafe: true,
		InputSchema: json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)}
}
func (clock) Available(*tools.Env) bool { return true }
func (clock) Call(context.Context, *tools.Env, json.RawMessage) (tools.Result, error) {
	return tools.Text("12:00"), nil
}

// clockFamily is the smallest family: it registers one tool and keeps
// nothing, so Base gives it every other phase.
type clockFamily struct{ family.Base }

func (clockFamily) Name() string { return "clock" }

func (clockFamily) Register(s *family.Setup) error {
	s.Register(clock{})
	return nil
}

// A family is one entry in the set the daemon walks phase by phase.
func Example() {
	set := family.NewSet(clockFamily{})
	cfg, err := config.Load("", set.Validate)
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := tools.NewRegistry()
	if err := set.Register(&family.Setup{Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tools: reg}); err != nil {
		fmt.Println(err)
		return
	}
	defer set.Close()
	for _, s := range reg.Specs() {
		fmt.Println(s.Name)
	}
	// Output: clock
}
