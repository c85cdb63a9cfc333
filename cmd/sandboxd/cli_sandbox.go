package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

var sandboxGroup = group{name: "sandbox", usage: `usage:
  sandboxd sandbox create --conversation ID [--image IMG] [--network none|bridge] [--host-path DIR]
                          [--cpus N] [--memory-mb N] [--pids N] [--env K=V]... [--json]
  sandboxd sandbox list [--conversation ID] [--json]
  sandboxd sandbox get ID [--json]
  sandboxd sandbox delete ID [--json]

Each takes --help for its flags.
`}

func runSandbox(ctx context.Context, args []string, stdout io.Writer) error {
	if ok, err := sandboxGroup.check(args); !ok {
		return err
	}
	var cf clientFlags
	switch args[0] {
	case "create":
		cmd := newCommand("sandbox create", "sandboxd sandbox create --conversation ID [--image IMG] [--network none|bridge] [--host-path DIR] [--cpus N] [--memory-mb N] [--pids N] [--env K=V]... [--json]")
		fs := cmd.fs
		cf.register(fs)
		var req api.CreateSandboxRequest
		var res api.Resources
		var hostPath string
		var env multiFlag
		fs.StringVar(&req.Conversation, "conversation", "", "conversation id (required)")
		fs.StringVar(&req.Image, "image", "", "image (default: the configured default image)")
		fs.StringVar(&req.Network, "network", "", "none (default) or bridge")
		fs.StringVar(&hostPath, "host-path", "", "host directory to use as the workspace")
		fs.Float64Var(&res.CPUs, "cpus", 0, "CPU limit")
		fs.Int64Var(&res.MemoryMB, "memory-mb", 0, "memory limit in MiB")
		fs.Int64Var(&res.Pids, "pids", 0, "process limit")
		fs.Var(&env, "env", "environment variable K=V (repeatable)")
		pos, err := cmd.parse(args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 || req.Conversation == "" {
			return cmd.bad()
		}
		if res != (api.Resources{}) {
			req.Resources = &res
		}
		if hostPath != "" {
			req.Workspace = &api.Workspace{HostPath: hostPath}
		}
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usagef("--env %q is not K=V; write it as NAME=value", kv)
			}
			if req.Env == nil {
				req.Env = map[string]string{}
			}
			req.Env[k] = v
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		sb, err := c.CreateSandbox(ctx, req)
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, sb)
		}
		fmt.Fprintf(stdout, "sandbox %s (conversation %s, %s on %s, %s)\n", sb.ID, sb.Conversation, sb.Image, sb.Backend, sb.State)
		return nil
	case "list":
		cmd := newCommand("sandbox list", "sandboxd sandbox list [--conversation ID] [--json]")
		cf.register(cmd.fs)
		var conv string
		cmd.fs.StringVar(&conv, "conversation", "", "only this conversation's sandbox")
		pos, err := cmd.parse(args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return cmd.bad()
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		list, err := c.ListSandboxes(ctx, conv)
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, list)
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "no sandboxes")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCONVERSATION\tIMAGE\tSTATE\tCREATED")
		for _, sb := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", sb.ID, sb.Conversation, sb.Image, sb.State, sb.CreatedAt.Local().Format(time.DateTime))
		}
		return tw.Flush()
	case "get", "delete":
		cmd := newCommand("sandbox "+args[0], "sandboxd sandbox "+args[0]+" ID [--json]")
		cf.register(cmd.fs)
		pos, err := cmd.parse(args[1:])
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return cmd.bad()
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		if args[0] == "delete" {
			if err := c.DeleteSandbox(ctx, pos[0]); err != nil {
				return err
			}
			if cf.json {
				return printJSON(stdout, map[string]string{"deleted": pos[0]})
			}
			fmt.Fprintf(stdout, "deleted %s\n", pos[0])
			return nil
		}
		sb, err := c.GetSandbox(ctx, pos[0])
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, sb)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 1, ' ', 0)
		for _, kv := range [][2]string{
			{"id", sb.ID}, {"conversation", sb.Conversation}, {"backend", sb.Backend}, {"image", sb.Image},
			{"state", sb.State}, {"created", sb.CreatedAt.Local().Format(time.DateTime)},
			{"workspace", sb.Workspace}, {"deployment", sb.Deployment},
		} {
			if kv[1] != "" {
				fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
			}
		}
		return tw.Flush()
	}
	return sandboxGroup.unknown(args[0])
}
