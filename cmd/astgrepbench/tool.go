package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/agent"
	"github.com/sandboxd/sandboxd/agent/daemon"
	"github.com/sandboxd/sandboxd/tools"
	"github.com/sandboxd/sandboxd/tools/astgrep"
	"github.com/sandboxd/sandboxd/tools/astgrep/engine"
)

var countRe = regexp.MustCompile(`^(\d+) match`)

// runToolChild calls ast_grep twice through a sandbox agent served in this
// process over a pipe (the daemon the sandbox runs, minus the container),
// so the figure includes the walk and the batched reads over the protocol.
func runToolChild(root, pattern string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := daemon.New()
	defer srv.Close()
	a, b := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeConn(ctx, b)
	}()
	client, err := agent.NewClient(ctx, a)
	if err != nil {
		return err
	}
	defer func() {
		client.Close()
		<-served
	}()
	conn := &tools.SandboxConn{ID: "bench", Backend: "host", Workspace: root, Agent: client}
	env := &tools.Env{
		Run:        &tools.Run{ID: "bench", Conversation: "bench", Surface: tools.SurfaceDefault},
		HasSandbox: true,
		Sandbox:    func(context.Context) (*tools.SandboxConn, error) { return conn, nil },
	}
	ts, _ := astgrep.Tools(engine.New())
	grep := ts[0]
	args, _ := json.Marshal(map[string]any{"pattern": pattern, "language": "go", "max_results": 1})
	call := func() (time.Duration, int, error) {
		t0 := time.Now()
		res, err := grep.Call(ctx, env, args)
		d := time.Since(t0)
		if err != nil {
			return d, 0, err
		}
		if res.IsError {
			return d, 0, fmt.Errorf("ast_grep: %s", res.Content[0].Text)
		}
		m := countRe.FindStringSubmatch(res.Content[0].Text)
		if m == nil {
			return d, 0, fmt.Errorf("ast_grep answer without a count: %.200s", res.Content[0].Text)
		}
		n, _ := strconv.Atoi(m[1])
		return d, n, nil
	}
	cold, n, err := call()
	if err != nil {
		return err
	}
	warm, _, err := call()
	if err != nil {
		return err
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return json.NewEncoder(os.Stdout).Encode(childResult{ColdMS: ms(cold), WarmMS: ms(warm), MaxRSS: ru.Maxrss, Count: n})
}
