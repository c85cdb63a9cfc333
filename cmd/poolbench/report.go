package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

// report renders the section: the figures row by row and the issue's
// targets, each met or not by computation.
func report(f flags, machine string, cold, warm, withEnv *figures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Warm pools: a claim next to a cold create\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; load average at the end %s; image `%s`, pool size %d; %s backend._\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine, bench.LoadAverage(), f.image, f.size, f.backend)
	fmt.Fprintf(&b, "| figure | n | p50 | p90 | max |\n| --- | ---: | ---: | ---: | ---: |\n")
	row := func(what string, s []time.Duration) {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", what, len(s),
			bench.Ms(bench.Percentile(s, 50)), bench.Ms(bench.Percentile(s, 90)), bench.Ms(bench.Percentile(s, 100)))
	}
	row("**claim**: Manager.Create of the pooled image until it returned", warm.create)
	row("**claim with env**: Manager.Create of the pooled image asking for one env variable (set through the agent) until it returned", withEnv.create)
	row("**cold**: Manager.Create of the same image in a deployment without a pool", cold.create)
	row("**claim** until the first agent call answered (the warm pipe is handed over)", warm.first)
	row("**claim with env** until a command printing the variable answered", withEnv.first)
	row("**cold** until the first agent call answered (pipe attached, one stat)", cold.first)
	checks := []bench.Check{
		bench.AtMost("claim p50 ≤ 50 ms on "+f.backend+" (Manager.Create)", bench.Percentile(warm.create, 50), 50*time.Millisecond),
		bench.AtMost("claim with env p50 ≤ 50 ms on "+f.backend+" (Manager.Create)", bench.Percentile(withEnv.create, 50), 50*time.Millisecond),
	}
	claim := bench.Percentile(warm.create, 50)
	if len(warm.api) > 0 {
		row("**claim** through sandboxd: `POST /v1/sandboxes` of the pooled image until 201", warm.api)
		row("**cold** through the same sandboxd: `POST /v1/sandboxes` of the same image with a memory limit (no pool sandbox has one) until 201", cold.api)
		claim = bench.Percentile(warm.api, 50)
		checks = append(checks, bench.AtMost("claim p50 ≤ 50 ms on Docker (`POST /v1/sandboxes`)", claim, 50*time.Millisecond))
	}
	checks = append(checks, bench.Check{Target: "claim p50 below a peer's published warm claim (92 ms)", Got: bench.Ms(claim), Met: claim > 0 && claim < 92*time.Millisecond})
	fmt.Fprintf(&b, "\n| target (issue 15) | measured | result |\n| --- | --- | --- |\n")
	for _, c := range checks {
		fmt.Fprintf(&b, "| %s | %s | **%s** |\n", c.Target, c.Got, c.Mark())
	}
	apiHow := ""
	if len(warm.api) > 0 {
		apiHow = "; then as many through one `bin/sandboxd` with that pool, alternating a cold create and a claim"
	}
	fmt.Fprintf(&b, "\nHow: `make build && go run ./cmd/poolbench`; %d rounds, each one cold create (deployment without a pool), one claim and one claim with an env variable (deployment with a pool of %d, each after it refilled), all on one engine in one process, each sandbox deleted before the next%s. A claim is a hello on the warm sandbox's open pipe and the engine's claim record (Docker: one `docker volume create`; Kubernetes: one pod patch), and with env one `set_env` to the agent; the cold create makes and starts the container (or pod) and, for the first call, opens the pipe with an exec. The Kubernetes figures are `go run ./cmd/poolbench -backend kubernetes` with a cluster up (section pools-kubernetes).\n", f.rounds, f.size, apiHow)
	return b.String()
}
