package family_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/family"
)

// recording is a family that writes each phase it goes through to a log
// shared by the families of one set.
type recording struct {
	family.Base
	name        string
	log         *[]string
	badConfig   bool
	failReg     bool
	drainBlocks chan struct{} // closed by another family's Drain; nil: none
	drainFrees  chan struct{}
	freed       bool // Drain returned because drainBlocks closed, not at the deadline
}

func (r *recording) Name() string { return r.name }

func (r *recording) Validate(*config.Config) error {
	*r.log = append(*r.log, "validate "+r.name)
	if r.badConfig {
		return errors.New(r.name + ".key: is wrong; fix it")
	}
	return nil
}

func (r *recording) Register(*family.Setup) error {
	*r.log = append(*r.log, "register "+r.name)
	if r.failReg {
		return errors.New("cannot start")
	}
	return nil
}

func (r *recording) RunEnded(run tools.Run) { *r.log = append(*r.log, "run "+run.ID+" "+r.name) }

func (r *recording) Drain(ctx context.Context) {
	if r.drainFrees != nil {
		close(r.drainFrees)
	}
	if r.drainBlocks != nil {
		select {
		case <-r.drainBlocks:
			r.freed = true
		case <-ctx.Done():
		}
	}
}

func (r *recording) Close() error {
	*r.log = append(*r.log, "close "+r.name)
	return nil
}

func TestSetPhases(t *testing.T) {
	var log []string
	a, b := &recording{name: "a", log: &log}, &recording{name: "b", log: &log}
	s := family.NewSet(a, b)
	if err := s.Validate(config.Default()); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(&family.Setup{}); err != nil {
		t.Fatal(err)
	}
	s.RunEnded(tools.Run{ID: "r1"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // a second Close does nothing
		t.Fatal(err)
	}
	want := "validate a,validate b,register a,register b,run r1 a,run r1 b,close b,close a"
	if got := strings.Join(log, ","); got != want {
		t.Errorf("phases ran as %s, want %s", got, want)
	}
}

// The first bad section stops validation with its message.
func TestSetValidateStopsAtTheFirstBadSection(t *testing.T) {
	var log []string
	s := family.NewSet(&recording{name: "a", log: &log, badConfig: true}, &recording{name: "b", log: &log})
	err := s.Validate(config.Default())
	if err == nil || err.Error() != "a.key: is wrong; fix it" {
		t.Errorf("Validate = %v, want a's message", err)
	}
	if strings.Join(log, ",") != "validate a" {
		t.Errorf("phases ran as %v, want only a's validation", log)
	}
}

// A family that cannot register stops the set: the ones registered before
// it are closed, the ones after never register, and the error names it.
func TestSetRegisterFailureClosesTheOnesBefore(t *testing.T) {
	var log []string
	s := family.NewSet(&recording{name: "a", log: &log}, &recording{name: "b", log: &log, failReg: true}, &recording{name: "c", log: &log})
	err := s.Register(&family.Setup{})
	if err == nil || err.Error() != "b: cannot start" {
		t.Errorf("Register = %v, want \"b: cannot start\"", err)
	}
	if got := strings.Join(log, ","); got != "register a,register b,close a" {
		t.Errorf("phases ran as %s", got)
	}
	s.RunEnded(tools.Run{ID: "r"}) // nobody is registered any more
	if got := strings.Join(log, ","); got != "register a,register b,close a" {
		t.Errorf("a run end reached a closed family: %s", got)
	}
}

// Drain drains the families side by side: one family's drain waiting for
// another's does not deadlock, and a drain that never finishes is cut off
// at the deadline.
func TestSetDrainSideBySide(t *testing.T) {
	var log []string
	freed := make(chan struct{})
	a := &recording{name: "a", log: &log, drainBlocks: freed}
	b := &recording{name: "b", log: &log, drainFrees: freed}
	stuck := &recording{name: "stuck", log: &log, drainBlocks: make(chan struct{})}
	s := family.NewSet(a, b, stuck)
	if err := s.Register(&family.Setup{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { s.Drain(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Drain did not return after its deadline")
	}
	// a drains first in the list and waits for b's drain: drained one
	// after another, a would sit until the deadline.
	if !a.freed {
		t.Error("a's drain ended at the deadline, not when b's drain freed it: the families were not drained side by side")
	}
	if stuck.freed {
		t.Error("the stuck family's drain was freed; it should have been cut off at the deadline")
	}
}
