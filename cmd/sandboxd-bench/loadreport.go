package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench"
)

// loadChecks are issue 15's targets for the load benchmark, judged at the
// highest level of concurrency.
func loadChecks(r loadResult) []bench.Check {
	if len(r.levels) == 0 {
		return nil
	}
	top := r.levels[0]
	for _, lv := range r.levels {
		if lv.clients > top.clients {
			top = lv
		}
	}
	read := bench.Summarize(top.calls["read"])
	var cs []bench.Check
	for _, t := range []string{"write", "edit"} {
		s := bench.Summarize(top.calls[t])
		limit := 3 * read.P99
		cs = append(cs, bench.Check{
			Target: fmt.Sprintf("%s p99 within 3x of read's at %d clients", t, top.clients),
			Got:    fmt.Sprintf("%s (read %s, %.1fx)", bench.Ms(s.P99), bench.Ms(read.P99), bench.Ratio(s.P99, read.P99)),
			Met:    s.N > 0 && read.N > 0 && s.P99 <= limit,
		})
	}
	return cs
}

// baselineTable finds the load section of an earlier report and returns
// its measurement line and its first table (the figures per level), to be
// shown next to this run's: a change's before and after, each measured by
// this program.
func baselineTable(doc string) (meta, table string, err error) {
	start, end := bench.Markers(benchLoad)
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		return "", "", fmt.Errorf("it has no %s ... %s section; give a report this benchmark wrote", start, end)
	}
	var rows []string
	for _, line := range strings.Split(doc[i+len(start):j], "\n") {
		switch {
		case meta == "" && strings.HasPrefix(line, "_Measured "):
			meta = line
		case strings.HasPrefix(line, "| "):
			rows = append(rows, line)
		case len(rows) > 0:
			return meta, strings.Join(rows, "\n") + "\n", nil
		}
	}
	if len(rows) == 0 {
		return "", "", fmt.Errorf("its load section has no table")
	}
	return meta, strings.Join(rows, "\n") + "\n", nil
}

func renderLoad(e *env, sd *sandboxd, r loadResult) string {
	var b strings.Builder
	b.WriteString("## Throughput: concurrent runs reading and writing\n\n" + meta(e, sd))
	if r.loadStart != "" {
		b.WriteString(" _Load average before the first level: " + r.loadStart + "._")
	}
	b.WriteString("\n\n")
	b.WriteString(row("clients", "sandboxes", "calls/s", "read p50 / p99", "write p50 / p99", "edit p50 / p99", "sandboxd CPU per call"))
	b.WriteString(row("---:", "---:", "---:", "---:", "---:", "---:", "---:"))
	for _, lv := range r.levels {
		cells := []string{fmt.Sprint(lv.clients), fmt.Sprint(lv.sandboxes), fmt.Sprintf("%.0f", float64(lv.total())/lv.elapsed.Seconds())}
		for _, t := range loadTools {
			s := bench.Summarize(lv.calls[t])
			cells = append(cells, fmt.Sprintf("%s / %s", bench.Ms(s.P50), bench.Ms(s.P99)))
		}
		per := time.Duration(0)
		if n := lv.total(); n > 0 {
			per = lv.cpu / time.Duration(n)
		}
		cells = append(cells, bench.Ms(per))
		b.WriteString(row(cells...))
	}
	if r.baselineTable != "" {
		b.WriteString("\nBefore (" + r.baselineLabel + "), measured by the same program:\n\n" + r.baselineMeta + "\n\n" + r.baselineTable)
	}
	b.WriteString("\n")
	b.WriteString(strings.Replace(checksTable(loadChecks(r)...), "target (issue 2)", "target (issue 15)", 1))
	var calls []string
	for _, lv := range r.levels {
		var per []string
		for _, t := range loadTools {
			per = append(per, fmt.Sprintf("%d %s", len(lv.calls[t]), t))
		}
		calls = append(calls, fmt.Sprintf("%d clients: %s", lv.clients, strings.Join(per, ", ")))
	}
	dur := time.Duration(0)
	if len(r.levels) > 0 {
		dur = r.levels[0].elapsed.Round(time.Second)
	}
	fmt.Fprintf(&b, "\nHow: %d sandboxes, each its own conversation; at each level every client is a run of "+
		"conversation i mod %d (so at 64 clients four runs share each conversation, and their writes queue behind "+
		"each other as the contract says, while different conversations must not wait for each other). Each client "+
		"owns a 2 KiB `%s` file and calls for %s without pause, in the repeating mix read, write, read, edit "+
		"(each client starting at a different point of it); write rewrites the whole file, edit changes its first "+
		"line, and every read checks it finds the text the client's last change wrote. One keep-alive HTTP "+
		"connection per client. Timed calls: %s. CPU per call is sandboxd's user + system time (from "+
		"/proc/<pid>/stat) over the level, divided by its calls; the agents' own work in the containers is not in it.\n",
		r.sandboxes, r.sandboxes, e.opts.loadExt, dur, strings.Join(calls, "; "))
	return b.String()
}
