package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/api/client"
)

var runGroup = group{name: "run", usage: `usage:
  sandboxd run create --conversation ID [--surface default|plan|readonly] [--workdir DIR] [--vibe]
                      [--space ID] [--approval auto|ask] [--parent RUN] [--json]
  sandboxd run list [--json]
  sandboxd run get RUN [--json]
  sandboxd run delete RUN [--json]

Each takes --help for its flags.
`}

func runRun(ctx context.Context, args []string, stdout io.Writer) error {
	if ok, err := runGroup.check(args); !ok {
		return err
	}
	var cf clientFlags
	switch args[0] {
	case "create":
		cmd := newCommand("run create", "sandboxd run create --conversation ID [--surface default|plan|readonly] [--workdir DIR] [--vibe] [--space ID] [--approval auto|ask] [--parent RUN] [--json]")
		fs := cmd.fs
		cf.register(fs)
		var req api.CreateRunRequest
		fs.StringVar(&req.Conversation, "conversation", "", "conversation id (required)")
		fs.StringVar(&req.Surface, "surface", "", "default, plan or readonly")
		fs.StringVar(&req.Workdir, "workdir", "", "working directory (default /workspace)")
		fs.BoolVar(&req.Vibe, "vibe", false, "enable background workers")
		fs.StringVar(&req.Space, "space", "", "space that questions go to")
		fs.StringVar(&req.Approval, "approval", "", "auto or ask")
		fs.StringVar(&req.Parent, "parent", "", "parent run id")
		pos, err := cmd.parse(args[1:])
		if err != nil {
			return err
		}
		if len(pos) > 0 || req.Conversation == "" {
			return cmd.bad()
		}
		c, err := cf.client()
		if err != nil {
			return err
		}
		run, err := c.CreateRun(ctx, req)
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, run)
		}
		printRun(ctx, stdout, c, run)
		return nil
	case "get":
		cmd := newCommand("run get", "sandboxd run get RUN [--json]")
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
		run, err := c.GetRun(ctx, pos[0])
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, run)
		}
		printRun(ctx, stdout, c, run)
		return nil
	case "list":
		cmd := newCommand("run list", "sandboxd run list [--json]")
		cf.register(cmd.fs)
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
		runs, err := c.ListRuns(ctx)
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, runs)
		}
		if len(runs) == 0 {
			fmt.Fprintln(stdout, "no runs")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCONVERSATION\tSURFACE\tWORKDIR\tOPTIONS")
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Conversation, r.Surface, or(r.Workdir, "-"), or(runOptions(r.Vibe, r.Approval, r.Space, r.Parent), "-"))
		}
		return tw.Flush()
	case "delete":
		cmd := newCommand("run delete", "sandboxd run delete RUN [--json]")
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
		if err := c.DeleteRun(ctx, pos[0]); err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, map[string]string{"ended": pos[0]})
		}
		fmt.Fprintf(stdout, "ended %s\n", pos[0])
		return nil
	}
	return runGroup.unknown(args[0])
}

// printRun says what a person needs next: the run id, where it runs, and
// the tools it may call (and, for those it may not, why).
func printRun(ctx context.Context, w io.Writer, c *client.Client, run api.Run) {
	where := "no sandbox yet: sandboxd sandbox create --conversation " + run.Conversation
	// The run does not name its sandbox; the conversation's is the one.
	if sbs, err := c.ListSandboxes(ctx, run.Conversation); err == nil && len(sbs) > 0 {
		where = "sandbox " + sbs[0].ID
	}
	fmt.Fprintf(w, "run %s (conversation %s, %s)\n", run.ID, run.Conversation, where)
	if opts := runOptions(run.Vibe, run.Approval, run.Space, run.Parent); run.Surface != "default" || opts != "" {
		fmt.Fprintf(w, "surface: %s%s\n", run.Surface, prefixed(", ", opts))
	}
	names := make([]string, len(run.Tools))
	for i, t := range run.Tools {
		names[i] = t.Name
	}
	if len(names) == 0 {
		fmt.Fprintln(w, "tools: none")
	} else {
		fmt.Fprintf(w, "tools: %s\n", strings.Join(names, ", "))
	}
	for _, u := range run.Unavailable {
		fmt.Fprintf(w, "not available: %s (%s)\n", strings.Join(u.Tools, ", "), u.Reason)
	}
}

// runOptions lists a run's settings that differ from the defaults.
func runOptions(vibe bool, approval, space, parent string) string {
	var o []string
	if vibe {
		o = append(o, "vibe")
	}
	if approval != "" && approval != "auto" {
		o = append(o, "approval "+approval)
	}
	if space != "" {
		o = append(o, "space "+space)
	}
	if parent != "" {
		o = append(o, "parent "+parent)
	}
	return strings.Join(o, ", ")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
