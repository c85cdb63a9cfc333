package main

import (
	"flag"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

// Benchmark names, in the order they run and appear in BENCHMARKS.md.
const (
	benchCreate = "create"
	benchRead4K = "read4k"
	benchIdle   = "idle"
	benchLoad   = "load"
)

var allBenches = []string{benchCreate, benchRead4K, benchIdle, benchLoad}

// defaultBenches run without --only; the load benchmark takes minutes and
// wants a quiet machine, so it runs only when named.
var defaultBenches = []string{benchCreate, benchRead4K, benchIdle}

type options struct {
	sandboxdBin string
	agentBin    string
	image       string
	out         string
	only        []string
	smoke       bool

	creates   int
	reads     int
	execs     int
	pipeReads int
	rounds    int
	warmup    int

	idle         int
	idleParallel int
	idleWait     time.Duration

	loadClients   []int
	loadSandboxes int
	loadDuration  time.Duration
	loadExt       string
	// loadBaseline is an earlier report whose load figures are shown as
	// "before", labelled loadBaselineLabel.
	loadBaseline      string
	loadBaselineLabel string
}

// parseFlags reads the command line; defaults for the binaries, the image
// and the output come from the environment `make bench` sets.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var only, loadClients string
	fs := flag.NewFlagSet("sandboxd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.sandboxdBin, "sandboxd", os.Getenv("SANDBOXD_BIN"), "sandboxd binary (default: built from ./cmd/sandboxd into a temp dir)")
	fs.StringVar(&o.agentBin, "agent", os.Getenv("SANDBOXD_AGENT_BIN"), "static sandbox-agent binary (default: built from ./cmd/sandbox-agent into a temp dir)")
	fs.StringVar(&o.image, "image", bench.EnvOr("SANDBOXD_TEST_IMAGE", "sandboxd-sandbox:latest"), "sandbox image (must have cat and sleep)")
	fs.StringVar(&o.out, "out", bench.EnvOr("SANDBOXD_BENCH_OUT", "BENCHMARKS.md"), "report file; only the sections of the benchmarks run are replaced")
	fs.StringVar(&only, "only", strings.Join(defaultBenches, ","), "benchmarks to run, comma-separated: "+strings.Join(allBenches, ", "))
	fs.IntVar(&o.creates, "creates", 5, "sandboxes created one by one for the create benchmark")
	fs.IntVar(&o.reads, "reads", 2000, "timed read tool calls through sandboxd")
	fs.IntVar(&o.execs, "execs", 300, "timed fresh docker exec calls (the peer)")
	fs.IntVar(&o.pipeReads, "pipe-reads", 2000, "timed reads on a raw agent pipe, without HTTP (0: skip)")
	fs.IntVar(&o.rounds, "rounds", 20, "rounds the read4k calls are interleaved in, so machine noise hits all alike")
	fs.IntVar(&o.warmup, "warmup", 100, "untimed calls through sandboxd before measuring (a tenth as many execs)")
	fs.IntVar(&o.idle, "idle", 200, "idle sandboxes mapped for the memory benchmark")
	fs.IntVar(&o.idleParallel, "idle-parallel", 4, "sandboxes created (and pipes opened) at a time for the memory benchmark")
	fs.DurationVar(&o.idleWait, "idle-wait", 10*time.Second, "how long the sandboxes sit idle before the last memory reading")
	fs.BoolVar(&o.smoke, "smoke", false, "minimal sizes (a call or two of each, 2 idle sandboxes); check each section renders without rewriting --out")
	fs.StringVar(&loadClients, "load-clients", "1,8,64", "levels of concurrent clients (runs) for the load benchmark, comma-separated")
	fs.IntVar(&o.loadSandboxes, "load-sandboxes", 16, "sandboxes (conversations) the load benchmark's clients are spread over")
	fs.DurationVar(&o.loadDuration, "load-duration", 60*time.Second, "how long each level of the load benchmark calls")
	fs.StringVar(&o.loadExt, "load-ext", ".txt", "extension of the load benchmark's files (.go: the diagnostics hook looks for a Go module above each)")
	fs.StringVar(&o.loadBaseline, "load-baseline", "", "an earlier report of the load benchmark whose figures are shown as \"before\"")
	fs.StringVar(&o.loadBaselineLabel, "load-baseline-label", "the earlier run", "what the --load-baseline figures are, e.g. a commit")
	if err := fs.Parse(args); err != nil {
		return o, usagef("%v", err)
	}
	if o.smoke {
		o.creates, o.reads, o.execs, o.pipeReads, o.rounds, o.warmup = 1, 2, 1, 1, 1, 1
		o.idle, o.idleParallel, o.idleWait = 2, 2, time.Second
	}
	if fs.NArg() > 0 {
		return o, usagef("sandboxd-bench takes no arguments, got %q; use flags such as --only read4k", fs.Arg(0))
	}
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(allBenches, name) {
			return o, usagef("--only names %q, which is not a benchmark; use a comma-separated list of %s", name, strings.Join(allBenches, ", "))
		}
		if !slices.Contains(o.only, name) {
			o.only = append(o.only, name)
		}
	}
	for _, c := range []struct {
		name string
		v    int
		min  int
	}{{"creates", o.creates, 1}, {"reads", o.reads, 1}, {"execs", o.execs, 1}, {"pipe-reads", o.pipeReads, 0},
		{"rounds", o.rounds, 1}, {"warmup", o.warmup, 0}, {"idle", o.idle, 1}, {"idle-parallel", o.idleParallel, 1}} {
		if c.v < c.min {
			return o, usagef("--%s is %d; give a number of at least %d", c.name, c.v, c.min)
		}
	}
	if o.rounds > min(o.reads, o.execs) {
		return o, usagef("--rounds %d is more than --reads or --execs; give fewer rounds than calls", o.rounds)
	}
	for _, f := range strings.Split(loadClients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return o, usagef("--load-clients has %q, which is not a positive number; give a list such as 1,8,64", f)
		}
		o.loadClients = append(o.loadClients, n)
	}
	if o.loadSandboxes < 1 {
		return o, usagef("--load-sandboxes is %d; give a number of at least 1", o.loadSandboxes)
	}
	if o.loadDuration < time.Second {
		return o, usagef("--load-duration %s is under a second; give a duration such as 60s", o.loadDuration)
	}
	if !strings.HasPrefix(o.loadExt, ".") || len(o.loadExt) < 2 || strings.ContainsAny(o.loadExt, "/ ") {
		return o, usagef("--load-ext %q is not a file extension; give one such as .txt or .go", o.loadExt)
	}
	if o.idleWait < 0 {
		return o, usagef("--idle-wait %s is negative; give a duration such as 10s", o.idleWait)
	}
	return o, nil
}

func (o options) runs(name string) bool { return slices.Contains(o.only, name) }
