package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandboxd/sandboxd/api"
	apiclient "github.com/sandboxd/sandboxd/api/client"
	"github.com/sandboxd/sandboxd/bench"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sandbox/docker"
)

// stateUse is what each sandbox of the fleet used in one state, in bytes.
type stateUse struct {
	// Memory is the container's cgroup as `docker stats` reads it (usage
	// less inactive page cache); Shim the proportional set size of the
	// engine's shim process that keeps it (containerd-shim-runc-v2, outside
	// the cgroup, gone with the container's processes).
	Memory, Shim []int64
	// Layer is the writable layer (docker inspect --size, SizeRw); Workspace
	// the files of its workspace volume.
	Layer, Workspace []int64
}

// fleetFigures are the idle fleet's use in the three states and what the
// machine has to hold it.
type fleetFigures struct {
	N                           int
	Running, Paused, Hibernated stateUse
	MemTotal                    int64  // /proc/meminfo MemTotal
	DiskFree                    int64  // free to a non-root user on DiskPath's file system
	DiskPath                    string // Docker's data root
}

// measureFleet starts n idle sandboxes of image, each with a Python kernel
// started by one eval cell and the note in its workspace, and reads each
// one's memory and disk running, paused (the API's pause) and hibernated
// (the API's hibernate), each after settle idle (a kernel just started is
// still loading). Docker only: it reads the engine directly.
func measureFleet(ctx context.Context, c *apiclient.Client, image string, n int, settle time.Duration) (fleetFigures, error) {
	f := fleetFigures{N: n}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return f, err
	}
	defer cli.Close()
	var fleet []*session
	for i := range n {
		s, err := openSession(ctx, c, api.CreateSandboxRequest{Conversation: fmt.Sprintf("fleet-%d", i), Image: image})
		if err != nil {
			return f, err
		}
		out, err := s.call(ctx, "eval", map[string]any{"language": "python", "code": "import os, sys\nidle = os.getpid()\nidle > 0", "description": "start an idle kernel"})
		if err != nil {
			return f, err
		}
		if !strings.Contains(out, "True") {
			return f, fmt.Errorf("the kernel of sandbox %s answered %q; want True", s.sb.ID, out)
		}
		fleet = append(fleet, s)
	}
	for _, st := range []struct {
		verb, state string
		into        *stateUse
	}{
		{"", sandbox.StateRunning, &f.Running},
		{"pause", sandbox.StatePaused, &f.Paused},
		{"hibernate", sandbox.StateHibernated, &f.Hibernated},
	} {
		for _, s := range fleet {
			if st.verb != "" {
				if _, err := s.verb(ctx, st.verb, st.state); err != nil {
					return f, err
				}
			}
		}
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case <-time.After(settle):
		}
		if err := readUse(ctx, cli, fleet, st.state, st.into); err != nil {
			return f, err
		}
	}
	if f.MemTotal, err = memTotal(); err != nil {
		return f, err
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return f, fmt.Errorf("the Docker engine does not describe itself: %w", err)
	}
	f.DiskPath = info.DockerRootDir
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(f.DiskPath, &sfs); err != nil {
		return f, fmt.Errorf("the free space of %s cannot be read: %w", f.DiskPath, err)
	}
	f.DiskFree = int64(sfs.Bavail) * int64(sfs.Bsize)
	for _, s := range fleet {
		if err := c.DeleteSandbox(ctx, s.sb.ID); err != nil {
			return f, err
		}
	}
	return f, nil
}

// readUse reads every sandbox's memory, shim and disk, after checking that
// GET reports it in state.
func readUse(ctx context.Context, cli *client.Client, fleet []*session, state string, into *stateUse) error {
	shims, err := shimPids()
	if err != nil {
		return err
	}
	for _, s := range fleet {
		if err := s.waitState(ctx, state); err != nil {
			return err
		}
		name := docker.NamePrefix + s.sb.ID
		c, _, err := cli.ContainerInspectWithRaw(ctx, name, true)
		if err != nil {
			return fmt.Errorf("docker inspect of %s: %w", name, err)
		}
		mem, err := bench.ContainerMemory(ctx, cli, c.ID)
		if err != nil {
			return err
		}
		var shim int64
		if pid, ok := shims[c.ID]; ok {
			if shim, err = pss(pid); err != nil {
				return err
			}
		}
		var layer int64
		if c.SizeRw != nil {
			layer = *c.SizeRw
		}
		var ws int64
		for _, m := range c.Mounts {
			if m.Destination == docker.Workspace {
				if ws, err = treeSize(m.Source); err != nil {
					return err
				}
			}
		}
		into.Memory = append(into.Memory, mem)
		into.Shim = append(into.Shim, shim)
		into.Layer = append(into.Layer, layer)
		into.Workspace = append(into.Workspace, ws)
	}
	return nil
}

// shimPids maps container ids to the pid of the containerd shim that keeps
// them (`containerd-shim-runc-v2 -namespace moby -id <id> ...`).
func shimPids() (map[string]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		line, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(line, []byte("containerd-shim")) {
			continue
		}
		args := strings.Split(string(line), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-id" {
				out[args[i+1]] = pid
			}
		}
	}
	return out, nil
}

// pss is a process's proportional set size (smaps_rollup): its private
// pages plus its share of the pages it shares, e.g. with the other shims.
func pss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, fmt.Errorf("the memory of shim %d cannot be read: %w", pid, err)
	}
	defer f.Close()
	return bench.ParseStatusKB(f, "Pss")
}

// treeSize is the apparent size of every regular file under dir, as
// SizeRw counts the writable layer.
func treeSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("the workspace %s cannot be measured: %w", dir, err)
	}
	return total, nil
}

// memTotal is the machine's memory (MemTotal of /proc/meminfo) in bytes.
func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return bench.ParseStatusKB(f, "MemTotal")
}
