package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

// backendOrder is the order of the backends' rows.
var backendOrder = []string{"docker", "containerd"}

// latencyRows are the latency table's figures, in order.
var latencyRows = []struct {
	what string
	pick func(*backendFigures) []time.Duration
}{
	{"**pause**: `POST /v1/sandboxes/{id}/pause` of a running sandbox until 200", func(b *backendFigures) []time.Duration { return b.Pause }},
	{"**resume** of a paused sandbox: `POST …/resume` until 200", func(b *backendFigures) []time.Duration { return b.Resume }},
	{"**first call after an automatic pause**: `read` of a small file, the resume included", func(b *backendFigures) []time.Duration { return b.AutoCall }},
	{"**the same call on the running sandbox**, right after", func(b *backendFigures) []time.Duration { return b.Running }},
	{"**hibernate**: `POST …/hibernate` until 200", func(b *backendFigures) []time.Duration { return b.Hibernate }},
	{"**resume** of a hibernated sandbox: `POST …/resume` until 200", func(b *backendFigures) []time.Duration { return b.Wake }},
	{"**first call after a hibernation**: the same `read`, the wake included", func(b *backendFigures) []time.Duration { return b.HibernatedCall }},
	{"**cold create + first call** (no lifecycle): `POST /v1/sandboxes` until 201, then the same `read`", func(b *backendFigures) []time.Duration { return b.Cold }},
}

// peers are the published figures, not measured here.
var peers = []struct{ who, what, figure string }{
	{"E2B", "resume of a paused sandbox", "about 1 s"},
	{"Morph", "branch of a running machine", "under 250 ms"},
	{"Blaxel", "resume from standby", "under 25 ms"},
}

// render writes the lifecycle section from r.
func render(f flags, machine, load string, at time.Time, r results) string {
	var b strings.Builder
	b.WriteString("## Lifecycle: pause, hibernate, resume, snapshots, forks\n\n")
	fmt.Fprintf(&b, "_Measured %s on %s; load average at the end %s; image `%s`; sandboxd %s; %s; the run took %s._\n\n",
		at.UTC().Format("2006-01-02 15:04 UTC"), machine, load, f.image, r.Sandboxd, r.Containerd, r.Took.Round(time.Second))

	b.WriteString("| figure | backend | n | p50 | p99 | max |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, row := range latencyRows {
		for _, name := range backendOrder {
			g := r.Backends[name]
			if g == nil {
				continue
			}
			s := row.pick(g)
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s |\n", row.what, name, len(s),
				bench.Ms(bench.Percentile(s, 50)), bench.Ms(bench.Percentile(s, 99)), bench.Ms(bench.Percentile(s, 100)))
		}
	}

	b.WriteString("\n| back to an idle conversation's sandbox | p50 | source |\n| --- | ---: | --- |\n")
	for _, name := range backendOrder {
		g := r.Backends[name]
		if g == nil {
			continue
		}
		cold := bench.Percentile(g.Cold, 50)
		vsCold := func(s []time.Duration) string {
			return bench.Ms(bench.Percentile(s, 50)) + versus(cold, bench.Percentile(s, 50))
		}
		fmt.Fprintf(&b, "| sandboxd on %s, paused: first call, resume included | %s | measured here |\n", name, vsCold(g.AutoCall))
		fmt.Fprintf(&b, "| sandboxd on %s, hibernated: first call, wake included | %s | measured here |\n", name, vsCold(g.HibernatedCall))
		fmt.Fprintf(&b, "| no lifecycle on %s: cold `POST /v1/sandboxes` + first call | %s | measured here, same run |\n", name, bench.Ms(cold))
	}
	for _, p := range peers {
		fmt.Fprintf(&b, "| %s: %s | %s | published, not measured here |\n", p.who, p.what, p.figure)
	}

	if r.Fleet.N > 0 {
		renderFleet(&b, r.Fleet, f.settle)
	}

	fmt.Fprintf(&b, "\nHow: `make build && go run ./cmd/lifecyclebench` (`BENCH=lifecycle scripts/bench.sh`): one `bin/sandboxd serve` per backend (Docker, then containerd with the image copied into its `sandboxd` namespace), driven over HTTP by the Go client (`api/client`) exactly as a platform would; every figure is the client's round trip on loopback, one request at a time. "+
		"**pause** and **resume** of a paused sandbox: %d cycles on one sandbox (agent only, its pipe open), each timing `PauseSandbox` until it answered state `paused` and `ResumeSandbox` until it answered `running` (sandboxd answers a resume once the agent does), with an untimed `read` after each resume proving the sandbox works. "+
		"**first call after an automatic pause**: a sandbox created with `lifecycle: {pause_after_s: 1}`, left alone while `GET /v1/sandboxes/{id}` was polled every %s (a GET is not use) until it said `paused`, then the `read` tool call (`POST /v1/runs/{id}/tools/read` of a %d-byte file, its text checked) timed until its answer, which includes sandboxd's resume and the agent's answer; %d times, and after each, %d more of the same `read` on the now running sandbox (**the same call on the running sandbox**). "+
		"**hibernate**, **resume** of a hibernated sandbox and **first call after a hibernation**: %d cycles on one sandbox, each `HibernateSandbox` until `hibernated` (the agent records its processes and exits, the container or task stops), `ResumeSandbox` until `running` (container or task started, agent answering), an untimed `read`, `HibernateSandbox` again, and then the `read` that wakes it, timed until its answer (the hibernate row holds both hibernations of each cycle). "+
		"**cold create + first call**: what a platform without a lifecycle does when the conversation comes back: `POST /v1/sandboxes` of the same image until 201, then the same `read`, timed together, %d times (each sandbox deleted, untimed, before the next); its run was made before the timer (a run needs no sandbox) and its workspace is a host directory already holding the file (`workspace.host_path`), so the figure counts no restore of the files a lifecycle keeps. "+
		"Each figure's p50 and p99 are nearest-rank (a sample that happened; with fewer than 100 samples p99 is the largest). The peers' figures are their own published claims, measured on their infrastructure, not here.\n",
		f.pauses, pollEvery, len(noteText), f.autos, f.running, f.hibernates, f.colds)
	if len(r.Workspaces) > 0 && r.Backends["docker"] != nil {
		renderSnapshots(&b, r, r.Backends["docker"].Cold)
	}
	return b.String()
}

// renderFleet writes the idle fleet's table and how to read it.
func renderFleet(b *strings.Builder, fl fleetFigures, settle time.Duration) {
	fmt.Fprintf(b, "\n| %d idle sandboxes (agent + Python kernel) | memory per sandbox: cgroup | + engine shim | in all | fit in %s of memory | disk per sandbox: writable layer + workspace |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
		fl.N, gib(fl.MemTotal))
	for _, st := range []struct {
		name string
		u    stateUse
	}{{"running", fl.Running}, {"paused", fl.Paused}, {"hibernated", fl.Hibernated}} {
		mem, shim := mean(st.u.Memory), mean(st.u.Shim)
		all := mem + shim
		fit := "no memory held"
		if all > 0 {
			fit = fmt.Sprintf("%d", fl.MemTotal/all)
		}
		layer, ws := mean(st.u.Layer), mean(st.u.Workspace)
		disk := fmt.Sprintf("%s + %s", size(layer), size(ws))
		if st.name == "hibernated" && layer+ws > 0 {
			disk += fmt.Sprintf(" (%d fit in the %s free under %s)", fl.DiskFree/(layer+ws), gib(fl.DiskFree), fl.DiskPath)
		}
		fmt.Fprintf(b, "| **%s** | %s (%s–%s) | %s | %s | %s | %s |\n", st.name, bench.MiB(mem), bench.MiB(minOf(st.u.Memory)), bench.MiB(maxOf(st.u.Memory)),
			bench.MiB(shim), bench.MiB(all), fit, disk)
	}
	run, paused := mean(fl.Running.Memory)+mean(fl.Running.Shim), mean(fl.Paused.Memory)+mean(fl.Paused.Shim)
	if run > 0 {
		fmt.Fprintf(b, "\nA paused sandbox holds %.0f%% of a running one's memory (a frozen cgroup keeps its pages: pausing saves CPU, not memory); a hibernated one holds %s.\n",
			100*float64(paused)/float64(run), bench.MiB(mean(fl.Hibernated.Memory)+mean(fl.Hibernated.Shim)))
	}
	fmt.Fprintf(b, "\nFleet: %d sandboxes of the image on Docker, each with its agent and a Python kernel started by one `eval` cell and the small file in its workspace, left idle %s before each reading; paused and hibernated through the API. Memory: the container's cgroup as `docker stats` reads it (usage less inactive page cache; cgroup v1 `memory.usage_in_bytes`, v2 `memory.current`), plus the proportional set size (`/proc/PID/smaps_rollup` Pss) of the `containerd-shim-runc-v2` that keeps the container, which lives outside its cgroup and exits with it (Pss divides the pages shims share among them, so it falls as more run); the mean per sandbox, the range of the cgroup figure in brackets. Pages of files every sandbox maps (the agent binary, Python's libraries) are charged to the cgroup that read them first, so the cgroup figure is what one more sandbox costs. "+
		"Fit is the machine's total memory (MemTotal, %s) divided by that mean: it assumes every byte goes to idle sandboxes, none to the kernel, Docker, containerd, sandboxd or page cache, and that memory is the only limit (idle sandboxes use no CPU); a real host keeps headroom, so it is an upper bound. "+
		"Disk: the writable layer (`docker inspect --size`, SizeRw) and the files of the workspace volume, the same in every state; the image's layers are shared by all and not counted. A hibernated sandbox holds no memory, so disk bounds it: the free space of Docker's data root divided by its disk; here the workspace holds only the small file, and a real one's files, the same in every state, lower that count.\n",
		fl.N, settle, gib(fl.MemTotal))
}

// versus words how p compares with the cold create's cold, both p50s.
func versus(cold, p time.Duration) string {
	r := bench.Ratio(cold, p)
	switch {
	case p <= 0 || cold <= 0:
		return ""
	case r >= 1.05:
		return fmt.Sprintf(" (%.1fx faster than a cold create)", r)
	case r <= 0.95:
		return fmt.Sprintf(" (%.1fx slower than a cold create)", 1/r)
	}
	return " (about as fast as a cold create)"
}

func mean(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	var s int64
	for _, x := range v {
		s += x
	}
	return s / int64(len(v))
}

func minOf(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	m := v[0]
	for _, x := range v[1:] {
		m = min(m, x)
	}
	return m
}

func maxOf(v []int64) int64 {
	var m int64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// gib formats bytes in GiB with one decimal.
func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// size formats bytes: B under 1 KiB, KiB under 10 MiB, else MiB.
func size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 10<<20:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return bench.MiB(n)
}
