package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/sandbox"
)

// peerLabel marks the plain containers this program creates as peers; they
// never carry sandbox.LabelManaged, so sandboxd leaves them alone.
const peerLabel = "io.sandboxd.bench.run"

// sweep force-removes, with their anonymous volumes, every container of
// this run: sandboxes whose conversation starts with convPrefix (whether
// or not their DELETE went through) and peer containers labelled with runID.
// It is the safety net behind the benchmarks' own deletes and runs after
// sandboxd has stopped, so nothing re-adopts a container midway.
func sweep(ctx context.Context, cli *dockerclient.Client, convPrefix, runID string, parallel int) (int, error) {
	var ids []string
	managed, err := cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))})
	if err != nil {
		return 0, fmt.Errorf("the sandboxes of this run cannot be listed for removal: %w", err)
	}
	for _, c := range managed {
		if strings.HasPrefix(c.Labels[sandbox.LabelConversation], convPrefix) {
			ids = append(ids, c.ID)
		}
	}
	peers, err := cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", peerLabel+"="+runID))})
	if err != nil {
		return 0, fmt.Errorf("the peer containers of this run cannot be listed for removal: %w", err)
	}
	for _, c := range peers {
		ids = append(ids, c.ID)
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards first
		first error
		sem   = make(chan struct{}, max(parallel, 1))
	)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("container %.12s cannot be removed: %w; remove it with `docker rm -f -v %.12s`", id, err, id)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return len(ids), first
}
