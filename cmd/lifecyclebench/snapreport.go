package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

// renderSnapshots writes the snapshot and fork tables and how they were
// taken. cold is the Docker cold create's samples of the same run.
func renderSnapshots(b *strings.Builder, r results, cold []time.Duration) {
	ws := r.Workspaces
	b.WriteString("\n### Snapshots and forks\n\n")
	fmt.Fprintf(b, "Docker only; containerd %s.\n\n", r.SnapContainerd)
	b.WriteString("| figure (Docker) |")
	for _, w := range ws {
		fmt.Fprintf(b, " %s workspace |", sizeName(w.Bytes))
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(ws)) + "\n")
	row := func(what string, cell func(*workspaceFigures) string) {
		b.WriteString("| " + what + " |")
		for _, w := range ws {
			b.WriteString(" " + cell(w) + " |")
		}
		b.WriteString("\n")
	}
	row("**snapshot**: `POST /v1/sandboxes/{id}/snapshots` until 201", func(w *workspaceFigures) string { return timing(w.Snapshot) })
	for _, k := range r.Copies {
		what := fmt.Sprintf("**fork into %s**: `POST /v1/sandboxes/{id}/fork` until 201, the whole request", copiesName(k))
		if k == 1 {
			what += " (its one copy's time)"
		}
		row(what, func(w *workspaceFigures) string { return timing(w.Fork[k]) })
		if k > 1 {
			row(fmt.Sprintf("… per copy (the whole request ÷ %d)", k), func(w *workspaceFigures) string { return timing(divide(w.Fork[k], k)) })
		}
	}
	row("**first call on a copy**: `read` of the small file, right after its fork", func(w *workspaceFigures) string { return timing(w.FirstCall) })
	row("**fork into 1 copy + its first call**, p50s added", func(w *workspaceFigures) string {
		return dur(bench.Percentile(w.Fork[1], 50)+bench.Percentile(w.FirstCallOne, 50)) + versus(bench.Percentile(cold, 50), bench.Percentile(w.Fork[1], 50)+bench.Percentile(w.FirstCallOne, 50))
	})
	row("**cold create + first call** (same run, above: no snapshot, a small workspace)", func(*workspaceFigures) string { return dur(bench.Percentile(cold, 50)) })
	row("disk: the snapshot's `size_bytes`", func(w *workspaceFigures) string { return diskSize(mean(w.SizeBytes)) })
	row("disk: the engine's growth per snapshot: image layer + workspace volume", func(w *workspaceFigures) string {
		l, v := diskMeans(w.SnapDisk)
		return diskSize(l) + " + " + diskSize(v)
	})
	row("disk: the engine's growth per copy: writable layer + workspace volume", func(w *workspaceFigures) string {
		l, v := diskMeans(w.CopyDisk)
		return diskSize(l) + " + " + diskSize(v)
	})
	last := r.Copies[len(r.Copies)-1]
	row(fmt.Sprintf("disk, cross-check: the data root's used space grew, over a fork into %s", copiesName(last)), func(w *workspaceFigures) string {
		g := mean(w.FSGrowth[last])
		if g < 0 {
			return "shrank " + diskSize(-g) + " (other work on the machine)"
		}
		return fmt.Sprintf("%s (%s for each of the %d workspace copies, the snapshot's and the copies')", diskSize(g), diskSize(g/int64(last+1)), last+1)
	})

	b.WriteString("\n| a sandbox that starts with another's files | p50 | source |\n| --- | ---: | --- |\n")
	for _, w := range ws {
		fmt.Fprintf(b, "| sandboxd on Docker: fork into 1 copy + its first call, %s workspace | %s | measured here |\n", sizeName(w.Bytes),
			dur(bench.Percentile(w.Fork[1], 50)+bench.Percentile(w.FirstCallOne, 50)))
	}
	fmt.Fprintf(b, "| sandboxd on Docker: cold create + first call (no files carried over) | %s | measured here, same run |\n", dur(bench.Percentile(cold, 50)))
	for _, p := range peers {
		fmt.Fprintf(b, "| %s: %s | %s | published, not measured here |\n", p.who, p.what, p.figure)
	}

	var samples []string
	for _, w := range ws {
		samples = append(samples, fmt.Sprintf("%s: %d", sizeName(w.Bytes), len(w.Snapshot)))
	}
	fmt.Fprintf(b, "\nSnapshots and forks: one source sandbox per size, made with `POST /v1/sandboxes` like the others, holding the small file and a file of that many random bytes (`head -c N /dev/urandom` through the `shell` tool, so nothing compresses) in its workspace, running, its agent's pipe open. "+
		"Samples of each snapshot and fork row (%s; the larger takes one to keep the run short, so its figures are single readings with no spread): each **snapshot** is `CreateSnapshot` timed until 201, its `size_bytes` checked to hold at least the workspace's random bytes; each **fork** is `ForkSandbox` timed until 201 with every copy made (it takes one snapshot, then makes the copies one after another, each from that snapshot's image with the workspace copied in), each copy's run made before the timer as the cold create's is; then the **first call on a copy**, the same `read` as above timed on each copy in turn once the fork has answered, and an untimed `stat` proving each copy holds the whole file. "+
		"Everything made is deleted, untimed, before the next sample, and at the end the bench checks that sandboxd lists no snapshot and the engine holds no image, carrier container or volume of any snapshot made, nor the workspace volume of the source or any copy. "+
		"Disk, as Docker keeps a snapshot (docs/DESIGN.md, \"Snapshots and forks\"): per snapshot, the layer its committed image adds (the top entry of `docker history`, the source container's own file system changes) plus its carrier container's writable layer, and the blocks (`st_blocks`) of the files in its `sandboxd-snap-` volume; per copy, its container's writable layer (`docker inspect --size`, SizeRw) and the blocks of the files in its workspace volume. The image's base layers are shared by the source, the snapshots and the copies and are not counted; the mean of every snapshot and copy is shown. A layer of 0 B means the source (or the copy) changed nothing outside its workspace: these only wrote files there; a package installed with apt-get would show in both. "+
		"`size_bytes` is sandboxd's own count: the bytes of the workspace's tar stream (headers included) plus the source's writable layer. "+
		"The cross-check is the used space of the file system under Docker's data root (`statfs`) just before and just after the fork: it counts everything written and removed in between on this shared machine, not only the fork's copies and snapshot, so it confirms the order of the figures above (no hidden second copy) and no more. "+
		"**fork into 1 copy + its first call** adds the two p50s, to set against the cold create's p50 of the same run (whose workspace holds only the small file: it carries nothing over). The peers' figures are their own published claims for resuming or branching a machine on their infrastructure, not measured here, and not the same operation: none copies a workspace of a given size on one disk.\n",
		strings.Join(samples, ", "))
}

// timing is a row's cell: p50, and with more than one sample the max and n.
func timing(s []time.Duration) string {
	switch len(s) {
	case 0:
		return "not measured"
	case 1:
		return dur(s[0]) + " (n 1)"
	}
	return fmt.Sprintf("%s (max %s, n %d)", dur(bench.Percentile(s, 50)), dur(bench.Percentile(s, 100)), len(s))
}

// dur formats a duration: as bench.Ms under 1 s, else in seconds.
func dur(d time.Duration) string {
	switch {
	case d < time.Second:
		return bench.Ms(d)
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// diskSize formats bytes as size does, and from 1 GiB in GiB.
func diskSize(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	return size(n)
}

func divide(s []time.Duration, k int) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, d := range s {
		out[i] = d / time.Duration(k)
	}
	return out
}

func diskMeans(u []diskUse) (layer, volume int64) {
	var l, v []int64
	for _, x := range u {
		l, v = append(l, x.Layer), append(v, x.Volume)
	}
	return mean(l), mean(v)
}

func copiesName(k int) string {
	if k == 1 {
		return "1 copy"
	}
	return fmt.Sprintf("%d copies", k)
}

// sizeName names a workspace size: whole GiB or MiB.
func sizeName(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
