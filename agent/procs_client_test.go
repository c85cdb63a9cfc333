package agent_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/agenttest"
	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// An agent from before long-lived processes is not sent the proc_ ops:
// it would reject them as unknown, and the caller learns what to do.
func TestProcOpsNeedAnAgentThatTakesThem(t *testing.T) {
	a, b := net.Pipe()
	go fakeAgent(b, proto.HelloResponse{Version: proto.Version, PID: 42, Fencing: true, SandboxEnv: true})
	c, err := agent.NewClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ProcStart(context.Background(), &proto.ProcStartRequest{Argv: []string{"true"}})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "predates long-lived processes") {
		t.Fatalf("proc_start on an agent without it = %v, want failed_precondition", err)
	}
	if _, err := c.ProcFollow(context.Background(), "p1", 0); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("proc_follow on an agent without it = %v, want failed_precondition", err)
	}
}

// An agent from before the activity op is not sent it; the caller learns
// why. A current one answers it.
func TestActivityNeedsAnAgentThatTakesIt(t *testing.T) {
	a, b := net.Pipe()
	go fakeAgent(b, proto.HelloResponse{Version: proto.Version, PID: 42, Processes: true})
	c, err := agent.NewClient(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Activity(context.Background()); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "predates reporting its activity") {
		t.Fatalf("activity on an agent without it = %v, want failed_precondition", err)
	}
	cur, _ := agenttest.New(t)
	if act, err := cur.Activity(context.Background()); err != nil || act.At.IsZero() || act.Running != 0 {
		t.Fatalf("activity of a current agent = %+v, %v", act, err)
	}
}

// A follow ends with its context, the process running on; a new follow
// from the last cursor continues without a gap or a repeat.
func TestProcFollowEndsWithItsContext(t *testing.T) {
	c, _ := agenttest.New(t)
	p, err := c.ProcStart(context.Background(), &proto.ProcStartRequest{Argv: []string{"sh", "-c", `i=0; while [ $i -lt 40 ]; do echo n$i; i=$((i+1)); sleep 0.02; done`}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f, err := c.ProcFollow(ctx, p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	var cursor int64
	fr, err := f.Next()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range fr.Chunks {
		got.Write(ch.Data)
	}
	cursor = fr.Next
	cancel()
	if _, err := f.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("next after the context ended: %v", err)
	}
	info, err := c.ProcGet(context.Background(), p.ID, 0)
	if err != nil || info.State != proto.ProcRunning {
		t.Fatalf("the process after its follow ended: %+v, %v", info, err)
	}
	f2, err := c.ProcFollow(context.Background(), p.ID, cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		fr, err := f2.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range fr.Chunks {
			got.Write(ch.Data)
		}
	}
	var want strings.Builder
	for i := range 40 {
		want.WriteString("n" + strconv.Itoa(i) + "\n")
	}
	if got.String() != want.String() {
		t.Fatalf("followed in two parts:\n%q\nwant\n%q", got.String(), want.String())
	}
}
