package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/bench"
)

// createResult holds one sample per sandbox for each side.
type createResult struct {
	// sandboxd: POST /v1/sandboxes until 201; until the first read tool
	// call has read back a file (create, open a run, write, read); DELETE.
	created, firstRead, deleted []time.Duration
	// peer: docker create+start; until a first fresh exec cat returned;
	// docker rm -f.
	peerCreated, peerFirstExec, peerDeleted []time.Duration
}

// runCreate creates the sandboxes one by one, each followed by a peer
// container, so both sides see the same engine state.
func runCreate(ctx context.Context, e *env, sd *sandboxd) (createResult, error) {
	var r createResult
	probe := []byte("probe line 1\nprobe line 2\n")
	for i := 0; i < e.opts.creates; i++ {
		conv := e.conversation("create", i)
		t0 := time.Now()
		sb, err := sd.api.CreateSandbox(ctx, api.CreateSandboxRequest{Conversation: conv, Image: e.opts.image})
		if err != nil {
			return r, fmt.Errorf("create sandbox %d: %w", i, err)
		}
		r.created = append(r.created, time.Since(t0))
		run, err := sd.api.CreateRun(ctx, api.CreateRunRequest{Conversation: conv})
		if err != nil {
			return r, fmt.Errorf("open a run on sandbox %d: %w", i, err)
		}
		if err := writeAndCheck(ctx, sd.api, run.ID, "probe.txt", probe); err != nil {
			return r, fmt.Errorf("first tool calls on sandbox %d: %w", i, err)
		}
		r.firstRead = append(r.firstRead, time.Since(t0))
		_ = sd.api.DeleteRun(ctx, run.ID)
		t0 = time.Now()
		if err := sd.api.DeleteSandbox(ctx, sb.ID); err != nil {
			return r, fmt.Errorf("delete sandbox %d: %w", i, err)
		}
		r.deleted = append(r.deleted, time.Since(t0))

		t0 = time.Now()
		id, err := startPeer(ctx, e)
		if err != nil {
			return r, err
		}
		r.peerCreated = append(r.peerCreated, time.Since(t0))
		out, _, code, err := bench.Exec(ctx, bench.DockerExec{Client: e.docker}, id, "cat", "/etc/hostname")
		if err != nil {
			return r, err
		}
		if code != 0 || len(bytes.TrimSpace(out)) == 0 {
			return r, fmt.Errorf("the first exec in the peer container exited %d with %q", code, out)
		}
		r.peerFirstExec = append(r.peerFirstExec, time.Since(t0))
		t0 = time.Now()
		if err := removePeer(ctx, e, id); err != nil {
			return r, err
		}
		r.peerDeleted = append(r.peerDeleted, time.Since(t0))
		progress(e.log, "create: %d/%d: sandboxd %s (first read %s), docker %s (first exec %s)", i+1, e.opts.creates,
			bench.Ms(r.created[i]), bench.Ms(r.firstRead[i]), bench.Ms(r.peerCreated[i]), bench.Ms(r.peerFirstExec[i]))
	}
	return r, nil
}
